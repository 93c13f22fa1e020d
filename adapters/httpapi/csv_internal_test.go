package httpapi

import "testing"

// TestCSVCellsCannotRunAsFormulas: a cell a spreadsheet would evaluate gets
// a leading quote (OWASP's CSV injection advice); any other is unchanged.
func TestCSVCellsCannotRunAsFormulas(t *testing.T) {
	cases := map[string]string{
		"=HYPERLINK(\"http://x\")": "'=HYPERLINK(\"http://x\")",
		"+1+1":                     "'+1+1",
		"-2+3":                     "'-2+3",
		"@SUM(A1)":                 "'@SUM(A1)",
		"\tcmd":                    "'\tcmd",
		"\rcmd":                    "'\rcmd",
		"":                         "",
		"1234":                     "1234",
		"paid":                     "paid",
		"2026-11-29T12:00:00Z":     "2026-11-29T12:00:00Z",
		"a=b":                      "a=b",
	}
	for in, want := range cases {
		if got := csvCell(in); got != want {
			t.Errorf("csvCell(%q) = %q, want %q", in, got, want)
		}
	}
}
