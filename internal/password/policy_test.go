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
	if n := len(commonPasswords()); n < 10000 {
		t.Errorf("len(commonPasswords()) = %d, want >= 10000", n)
	}
	for _, pw := range []string{"password1234", "qwerty123456", "administrator"} {
		if _, ok := commonPasswords()[pw]; !ok {
			t.Errorf("commonPasswords()[%q] missing, want present", pw)
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
