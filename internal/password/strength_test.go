package password

import (
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/trustelem/zxcvbn"
)

// codes returns the codes of p.Check(pw, email).
func codes(p Policy, pw, email string) []string {
	var got []string
	for _, e := range p.Check(pw, email) {
		got = append(got, e.Code)
	}
	return got
}

func TestPolicyCheckStrength(t *testing.T) {
	p := DefaultPolicy()
	weak := []string{"too_weak"}
	tests := []struct {
		name, pw, email string
		want            []string
	}{
		// Long enough and on no list, but guessable: the audit's four.
		{"word and digit sequence", "password1234567", "", weak},
		{"digit sequence", "123456789012345", "", weak},
		{"repeated character", "aaaaaaaaaaaa", "", weak},
		{"keyboard rows", "qwertyuiopasdfgh", "", weak},
		{"l33t word and digits", "P@ssw0rd12345", "", weak},
		{"repeated word", "letmeinletmein", "", weak},
		{"whitespace only", strings.Repeat(" ", 16), "", weak},

		// Built from the email: weak for its owner, fine for anyone else.
		{"email plus a digit", "ann.long@example.com1", "ann.long@example.com", weak},
		{"email reversed", "moc.elpmaxe@gnol.nna", "ann.long@example.com", weak},
		{"email parts and digits", "annlong123456", "ann.long@example.com", weak},
		{"email parts rearranged", "examplecomann1", "ann.long@example.com", weak},
		{"email parts, own email", "zqvlorkant.example", "zqvlorkant@example.com", weak},
		{"email parts, other email", "zqvlorkant.example", "ann@example.com", nil},
		{"local part and year, own email", "Zqvlorkant@Example.com2024", "zqvlorkant@example.com", weak},
		{"local part and year, other email", "Zqvlorkant@Example.com2024", "ann@example.com", nil},
		{"own email in capitals and spaces", "zqvlorkant2931!", "  ZQVLORKANT@example.com ", weak},

		// Strong: passphrases and random strings.
		{"four words", "correct horse battery staple", "ada@example.com", nil},
		{"passphrase", "a long and unguessable passphrase", "grace@example.com", nil},
		{"passphrase with a comma", "the admin passphrase, long enough", "root@example.com", nil},
		{"another passphrase", "another long unguessable passphrase", "grace@example.com", nil},
		{"short passphrase", "an entirely new passphrase", "user1-1763927000@example.com", nil},
		{"random 12", "zq7#xk9@pl2m", "", nil},
		{"random 16", "k8#Qz!vR2m@Lp9wX", "", nil},
		{"non-Latin", "пароль-密码-كلمة-🔑", "", nil},

		// Another rule refused it: no estimate, and no second reason.
		{"short and weak", "aaaa", "", []string{"too_short"}},
		{"common and weak", "password1234", "", []string{"common"}},
		{"equals email", "ann.long@example.com", "ann.long@example.com", []string{"equals_email"}},
		{"too long and weak", strings.Repeat("a", 129), "", []string{"too_long"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := codes(p, tt.pw, tt.email); !slices.Equal(got, tt.want) {
				t.Errorf("Check(%q, %q) codes = %v, want %v", tt.pw, tt.email, got, tt.want)
			}
		})
	}
}

// The passwords other tests and the README register, change and reset with
// (with the emails they use) must stay acceptable, or those tests break.
func TestPolicyAcceptsRepositoryPasswords(t *testing.T) {
	p := DefaultPolicy()
	tests := []struct{ where, pw, email string }{
		{"README, auth and e2e tests", "correct horse battery staple", "ada@example.com"},
		{"e2e tests (uniqueEmail)", "correct horse battery staple", "user12-1763927000000000000@example.com"},
		{"README register", "a long and unguessable passphrase", "grace@example.com"},
		{"README reset", "another long unguessable passphrase", "grace@example.com"},
		{"README admin", "the admin passphrase, long enough", "root@example.com"},
		{"e2e reset", "an entirely new passphrase", "user3-1763927000000000000@example.com"},
		{"e2e change", "a different long passphrase", "user4-1763927000000000000@example.com"},
		{"e2e users create", "a long admin passphrase 42", "user5-1763927000000000000@example.com"},
		{"auth reset", "a brand new passphrase", "reset@example.com"},
		{"auth reset, second use", "another new passphrase", "reset@example.com"},
		{"auth reset, replaced token", "yet another passphrase", "reset@example.com"},
		{"auth change, first", "the first new passphrase", "twice@example.com"},
		{"auth change, second", "the second new passphrase", "twice@example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.where, func(t *testing.T) {
			if errs := p.Check(tt.pw, tt.email); errs != nil {
				t.Errorf("Check(%q, %q) = %v, want nil", tt.pw, tt.email, errs)
			}
		})
	}
}

func TestPolicyAcceptsRandomStrings(t *testing.T) {
	p := DefaultPolicy()
	// A fixed seed keeps the test repeatable; these are test inputs, not
	// secrets.
	r := rand.New(rand.NewChaCha8([32]byte{'p', 'a', 'l', 'i', 's', 'a', 'd', 'e'}))
	const printableASCII = " !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~"
	for range 100 {
		b := make([]byte, 16)
		for i := range b {
			b[i] = printableASCII[r.IntN(len(printableASCII))]
		}
		pw := string(b)
		if errs := p.Check(pw, "ann.long@example.com"); errs != nil {
			t.Errorf("Check(%q) = %v, want nil", pw, errs)
		}
	}
}

// Only the first estimateRunes runes are estimated: a 128-rune password costs
// no more than a 32-rune one, and what follows them changes nothing.
func TestEstimateReadsOnlyTheStart(t *testing.T) {
	weakStart := strings.Repeat("a", estimateRunes)
	strongStart := "zq7#xk9@pl2m k8#Qz!vR2m@Lp9wX ab"
	if n := utf8.RuneCountInString(strongStart); n != estimateRunes {
		t.Fatalf("len(strongStart) = %d runes, want %d", n, estimateRunes)
	}
	tests := []struct {
		name, pw string
		want     []string
	}{
		{"weak start, strong rest", weakStart + strings.Repeat("k8#Qz!vR2m@Lp9wX", 6), []string{"too_weak"}},
		{"strong start, weak rest", strongStart + strings.Repeat("a", 96), nil},
		{"weak start, multi-byte rest", weakStart + strings.Repeat("密", 96), []string{"too_weak"}},
	}
	p := DefaultPolicy()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if n := utf8.RuneCountInString(tt.pw); n != 128 {
				t.Fatalf("len(pw) = %d runes, want 128", n)
			}
			errs := p.Check(tt.pw, "")
			var got []string
			for _, e := range errs {
				got = append(got, e.Code)
				if !strings.Contains(e.Message, "first 32 characters") {
					t.Errorf("Check(%q).Message = %q, want it to say only the first 32 characters were judged", tt.pw, e.Message)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Check(%q) codes = %v, want %v", tt.pw, got, tt.want)
			}
			if g, w := estimateGuesses(tt.pw, ""), estimateGuesses(prefixRunes(tt.pw, estimateRunes), ""); g != w {
				t.Errorf("estimateGuesses(128 runes) = %g, want %g as for its first %d runes", g, w, estimateRunes)
			}
		})
	}
}

func TestPrefixRunes(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"", 3, ""},
		{"abc", 0, ""},
		{"abc", 2, "ab"},
		{"abc", 3, "abc"},
		{"abc", 4, "abc"},
		{"é密🔑x", 3, "é密🔑"},
	}
	for _, tt := range tests {
		if got := prefixRunes(tt.in, tt.n); got != tt.want {
			t.Errorf("prefixRunes(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestUserInputs(t *testing.T) {
	tests := []struct {
		email string
		want  []string
	}{
		{"", nil},
		{"   ", nil},
		{"Ann.Long@Example.com", []string{"ann.long@example.com", "ann.long", "example.com", "ann", "long", "example", "com"}},
		{" jo+x_y@ab.io ", []string{"jo+x_y@ab.io", "jo+x_y", "ab.io"}},
		{"ＺＯＥ@example.org", []string{"zoe@example.org", "zoe", "example.org", "zoe", "example", "org"}},
		{"no-at-sign", []string{"no-at-sign", "sign"}},
	}
	for _, tt := range tests {
		if got := userInputs(tt.email); !slices.Equal(got, tt.want) {
			t.Errorf("userInputs(%q) = %q, want %q", tt.email, got, tt.want)
		}
	}
}

// Check is called from concurrent requests; run under -race.
func TestPolicyCheckConcurrent(t *testing.T) {
	p := DefaultPolicy()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for _, pw := range []string{"correct horse battery staple", "P@ssw0rd12345", "aaaaaaaaaaaa", "19121990-31/12/1999"} {
				before := codes(p, pw, "ann.long@example.com")
				if got := codes(p, pw, "ann.long@example.com"); !slices.Equal(got, before) {
					t.Errorf("goroutine %d: Check(%q) codes = %v, then %v", i, pw, before, got)
				}
			}
		})
	}
	wg.Wait()
}

// worstCase is about the slowest input found for zxcvbn: every l33t
// substitution character, so its l33t matcher tries every substring under
// every substitution table.
var worstCase = strings.Repeat("4@8({[</369&#!1/|0$5+7%2/", 6)[:128]

// BenchmarkEstimate measures the strength check as Check runs it and, for
// comparison, zxcvbn on a whole 128-character password (what the bound
// avoids). Compare with BenchmarkHash.
func BenchmarkEstimate(b *testing.B) {
	const email = "ann.long@example.com"
	p := DefaultPolicy()
	for _, bb := range []struct{ name, pw string }{
		{"passphrase", "correct horse battery staple"},
		{"random16", "k8#Qz!vR2m@Lp9wX"},
		{"passphrase128", strings.Repeat("correct horse battery staple ", 5)[:128]},
		{"worst128", worstCase},
	} {
		b.Run("Check/"+bb.name, func(b *testing.B) {
			for b.Loop() {
				p.Check(bb.pw, email)
			}
		})
	}
	b.Run("unbounded/worst128", func(b *testing.B) {
		for b.Loop() {
			zxcvbn.PasswordStrength(worstCase, userInputs(email))
		}
	})
}

// FuzzPolicyCheck feeds arbitrary passwords and emails to Check: it must not
// panic, must be deterministic, must report only known codes, too_weak only
// alone, and never quote the password.
func FuzzPolicyCheck(f *testing.F) {
	for _, s := range [][2]string{
		{"correct horse battery staple", "ada@example.com"},
		{"password1234567", ""},
		{"ann.long@example.com1", "ann.long@example.com"},
		{worstCase, ""},
		{"ｐａｓｓｗｏｒｄ１２３４５６", "ｐ@example.com"},
		{"19121990-31/12/1999 2001", "x@y"},
		{"é密🔑\u0301\u00a0x", "@@"},
		{"abc\xff\xfe", "\xff@example.com"},
	} {
		f.Add(s[0], s[1])
	}
	known := map[string]bool{codeTooShort: true, codeTooLong: true, codeNotPrint: true, codeCommon: true, codeEqualsEmail: true, codeTooWeak: true}
	p := DefaultPolicy()
	f.Fuzz(func(t *testing.T, pw, email string) {
		pw = Normalize(pw)
		errs := p.Check(pw, email)
		if again := p.Check(pw, email); !slices.Equal(again, errs) {
			t.Fatalf("Check(%q, %q) = %v, then %v", pw, email, errs, again)
		}
		for _, e := range errs {
			if !known[e.Code] {
				t.Errorf("Check(%q, %q) code %q, want a known code", pw, email, e.Code)
			}
			if e.Code == codeTooWeak && len(errs) != 1 {
				t.Errorf("Check(%q, %q) = %v, want too_weak alone", pw, email, errs)
			}
			if len(pw) > 2 && strings.Contains(e.Message, pw) {
				t.Errorf("Check(%q, %q).Message = %q quotes the password", pw, email, e.Message)
			}
		}
	})
}
