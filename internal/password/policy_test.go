package password

import (
	"slices"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"ascii unchanged", "Tr0ub4dor&3", "Tr0ub4dor&3"},
		{"full-width letters", "ｐａｓｓｗｏｒｄ", "password"},
		{"ligature", "ﬁsh", "fish"},
		{"composed e acute", "caf\u0065\u0301", "caf\u00e9"},
		{"no-break space", "a\u00a0b", "a b"},
		{"ideographic space", "a\u3000b", "a b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Normalize(tt.in); got != tt.want {
				t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestCommonList(t *testing.T) {
	list := string(commonPasswords())
	if !strings.HasSuffix(list, "\n") {
		t.Fatal("common-passwords.txt does not end in a newline")
	}
	lines := strings.Split(strings.TrimSuffix(list, "\n"), "\n")
	if len(lines) < 10000 {
		t.Errorf("common-passwords.txt has %d lines, want >= 10000", len(lines))
	}
	for i, l := range lines {
		if l == "" || l != strings.TrimSpace(l) || l != strings.ToLower(l) || l != Normalize(l) {
			t.Errorf("line %d %q is not a trimmed, lowercased, NFKC-normalized password", i+1, l)
		}
		if i > 0 && lines[i-1] >= l {
			t.Fatalf("line %d %q does not sort after line %d %q (LC_ALL=C sort -u keeps the list searchable)", i+1, l, i, lines[i-1])
		}
	}
	checkContains(t, commonPasswords(), lines)
	for _, pw := range []string{"password1234", "qwerty123456", "administrator"} {
		if !commonPasswords().Contains(pw) {
			t.Errorf("commonPasswords().Contains(%q) = false, want true", pw)
		}
	}
}

func TestSortedListContains(t *testing.T) {
	for _, list := range []SortedList{"", "b\n", "b\nd\nf\n", "b\nd\nf", "a\nab\nabc\nb\n"} {
		words := strings.FieldsFunc(string(list), func(r rune) bool { return r == '\n' })
		checkContains(t, list, words)
	}
}

// FuzzSortedListContains checks Contains against a map for lists made of
// the fuzzer's words.
func FuzzSortedListContains(f *testing.F) {
	f.Add("b d f", "c")
	f.Add("a ab abc", "ab")
	f.Fuzz(func(t *testing.T, words, probe string) {
		ws := strings.Fields(words)
		slices.Sort(ws)
		ws = slices.Compact(ws)
		list := SortedList(strings.Join(ws, "\n") + "\n")
		if len(ws) == 0 {
			list = ""
		}
		checkContains(t, list, append(ws, probe))
	})
}

// checkContains checks list.Contains, against a map of words, for every
// word and for neighbours of each that sort just before, just after and
// far from it.
func checkContains(t *testing.T, list SortedList, words []string) {
	t.Helper()
	set := map[string]bool{}
	for _, l := range strings.Split(string(list), "\n") {
		if l != "" {
			set[l] = true
		}
	}
	probes := []string{"", "\x00", "\xff\xff", "zzzzzzzzzzzzzzzzzzzz"}
	for _, w := range words {
		probes = append(probes, w, w+"\x00", w+"!", w+"\xff", "\x00"+w)
		if w != "" {
			probes = append(probes, w[:len(w)-1], w[1:])
		}
	}
	for _, p := range probes {
		if got := list.Contains(p); got != set[p] {
			t.Fatalf("Contains(%q) = %v, want %v", p, got, set[p])
		}
	}
}

func TestPolicyCheck(t *testing.T) {
	p := DefaultPolicy()
	tests := []struct {
		name, pw, email string
		want            []string
	}{
		{"fine", "correct horse battery", "ann@example.com", nil},
		{"pass-phrase with spaces", "a b c d e f ", "", nil},
		{"exactly 12", "zq7#xk9@pl2m", "", nil},
		{"exactly 128", strings.Repeat("correct horse battery staple ", 5)[:128], "", nil},
		{"any printable unicode", "пароль-密码-كلمة-🔑", "", nil},
		{"12 runes of multi-byte", "ключ密码🔑замок", "", nil},
		{"too short", "zq7#xk", "", []string{"too_short"}},
		{"empty", "", "", []string{"too_short"}},
		{"11 runes", strings.Repeat("é", 11), "", []string{"too_short"}},
		{"too long", strings.Repeat("x", 129), "", []string{"too_long"}},
		{"control char", "correct horse\tbattery", "", []string{"not_printable"}},
		{"nul", "correct horse\x00battery", "", []string{"not_printable"}},
		{"invalid utf-8", "correct horse\xffbattery", "", []string{"not_printable"}},
		{"unnormalized no-break space", "correct\u00a0horse battery", "", []string{"not_printable"}},
		{"common", "password1234", "", []string{"common"}},
		{"common any case", "PassWord1234", "", []string{"common"}},
		{"common after NFKC", Normalize("ｐａｓｓｗｏｒｄ１２３４"), "", []string{"common"}},
		{"short and common", "dragon", "", []string{"too_short", "common"}},
		{"equals email", "Ann.Long@Example.com", "  ann.long@example.com ", []string{"equals_email"}},
		{"empty email never matches", "            ", "  ", []string{"too_weak"}},
		{"short and control", "ab\x07", "", []string{"too_short", "not_printable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := p.Check(tt.pw, tt.email)
			var got []string
			for _, e := range errs {
				got = append(got, e.Code)
				if e.Field != "password" {
					t.Errorf("Check(%q).Field = %q, want password", tt.pw, e.Field)
				}
				if e.Message == "" || (len(tt.pw) > 2 && strings.Contains(e.Message, tt.pw)) {
					t.Errorf("Check(%q).Message = %q, want a message without the password", tt.pw, e.Message)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Check(%q, %q) codes = %v, want %v", tt.pw, tt.email, got, tt.want)
			}
		})
	}
}

func TestPolicyNoList(t *testing.T) {
	p := Policy{MinLength: 4}
	if errs := p.Check("password1234", ""); errs != nil {
		t.Errorf("Policy{MinLength: 4}.Check(common) = %v, want nil", errs)
	}
}

// TestNormalizeBound: the longest acceptable password still normalizes in
// its widest spellings, and input past MaxNormalized, which could only be
// refused or match nothing, comes back as it is and is refused as too long.
func TestNormalizeBound(t *testing.T) {
	for _, tt := range []struct{ name, typed, want string }{
		{"128 Hangul syllables typed as jamo", strings.Repeat("\u1100\u1161\u11a8", 128), strings.Repeat("\uac01", 128)},
		{"128 full-width letters", strings.Repeat("ｐ", 128), strings.Repeat("p", 128)},
	} {
		if len(tt.typed) > MaxNormalized {
			t.Fatalf("%s: %d bytes, past MaxNormalized", tt.name, len(tt.typed))
		}
		got := Normalize(tt.typed)
		if got != tt.want {
			t.Errorf("%s: Normalize = %q, want %q", tt.name, got, tt.want)
		}
		if c := codes(Policy{MaxLength: 128}, got, ""); len(c) != 0 {
			t.Errorf("%s: refused %v, want accepted", tt.name, c)
		}
	}
	hostile := strings.Repeat("\ufdfa", 21000) // NFKC: 18 characters each
	if got := Normalize(hostile); got != hostile {
		t.Errorf("Normalize of %d bytes changed it (to %d bytes); want it back as it is", len(hostile), len(got))
	}
	if c := codes(DefaultPolicy(), Normalize(hostile), ""); !slices.Contains(c, codeTooLong) {
		t.Errorf("a %d-byte password refused for %v, want too_long", len(hostile), c)
	}
}
