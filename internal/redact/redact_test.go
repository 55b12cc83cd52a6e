package redact

import (
	"strings"
	"testing"
)

const pw = "S3cr3t-pw"

func TestDSNForms(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"postgres://app:" + pw + "@db:5432/x?sslmode=disable",
		"postgresql://app@db/x?sslmode=disable&password=" + pw,
		"postgres://app@db/x?PASSWORD=" + pw,
		"host=db user=app password=" + pw + " dbname=x",
		"host=db user=app password='" + pw + "' dbname=x",
		"host=db user=app password = " + pw + " dbname=x",
		"app:" + pw + "@tcp(db:3306)/x?parseTime=true",
		"mysql://app:" + pw + "@tcp(db:3306)/x",
		"mysql://app:" + pw + "@db:3306/x",
		"app:" + pw + "@/x",
		"redis://u:" + pw + "@h/0",
		"://weird:" + pw + "@",
	} {
		got := DSN(dsn)
		if strings.Contains(got, pw) {
			t.Errorf("DSN(%q) = %q", dsn, got)
		}
		if got := Text("error: could not use "+dsn, dsn); strings.Contains(got, pw) {
			t.Errorf("Text with %q = %q", dsn, got)
		}
	}
}

func TestURLStripsUserinfoAndSecretParams(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://hook:" + pw + "@h/x?token=" + pw + "&a=1": "http://h/x?token=xxxxx&a=1",
		"https://" + pw + "@h/x":                          "https://h/x",
		"nats://u:" + pw + "@h:4222":                      "nats://h:4222",
		"http://h/x":                                      "http://h/x",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTextStripsURLsInErrors(t *testing.T) {
	t.Parallel()
	msg := `Post "http://hook:` + pw + `@127.0.0.1:1/x": dial tcp: connection refused`
	if got := Text(msg); strings.Contains(got, pw) || !strings.Contains(got, "127.0.0.1:1/x") {
		t.Errorf("Text = %q", got)
	}
}

func TestSecretsIncludesPGPASSWORD(t *testing.T) {
	t.Setenv("PGPASSWORD", pw)
	if got := Text("auth failed for password "+pw, "postgres://app@db/x"); strings.Contains(got, pw) {
		t.Errorf("Text = %q", got)
	}
}

// HostileDSNs are DSNs whose password (pw) a careless redaction shows:
// misspelled keys, characters a URL must escape left unescaped, quoting,
// odd spacing, several hosts, secrets in query parameters. Shared with
// the CLI's test (every command that takes --dsn).
func hostileDSNs(pw string) []string {
	return []string{
		"postgres://app:" + pw + "@127.0.0.1:1/x?sslmode=disable",
		"postgres://app:p@ss#" + pw + "@127.0.0.1:1/x",
		"postgres://app:" + pw + "#frag@127.0.0.1:1/x",
		"postgres://app:a/b" + pw + "@127.0.0.1:1/x",
		"postgres://app:" + pw + "?x@127.0.0.1:1/x",
		"postgresql://app@127.0.0.1:1/x?password=" + pw,
		"postgres://app@127.0.0.1:1/x?pasword=" + pw,
		"postgres://app@127.0.0.1:1/x?passwd=" + pw + "&sslmode=disable",
		"postgres://app@127.0.0.1:1/x?sslpassword=" + pw,
		"postgres://app:%40" + pw + "@127.0.0.1:1/x",
		"postgres://app:" + pw + "@127.0.0.1:1,127.0.0.2:1/x",
		"host=127.0.0.1 port=1 user=app password=" + pw + " dbname=x",
		"host=127.0.0.1 port=1 user=app pasword=" + pw + " dbname=x",
		"host=127.0.0.1 port=1 user=app passwd=" + pw + " dbname=x",
		"host=127.0.0.1 port=1 user=app pwd=" + pw + " dbname=x",
		"host=127.0.0.1 port=1 user=app passwrd=" + pw + " dbname=x",
		"host=127.0.0.1 port=1 user=app password='" + pw + " with spaces' dbname=x",
		"host=127.0.0.1 port=1 user=app password = " + pw + " dbname=x",
		"host=127.0.0.1 port=1 user=app PASSWORD=" + pw + " dbname=x",
		"host=127.0.0.1 port=1 user=app sslmode=disabel password=" + pw,
		"host=127.0.0.1 port=1 user=app connect_timeout=abc password=" + pw,
		"host=127.0.0.1 port=1 user=app passw0rd=" + pw,
		"host=127.0.0.1 port=1 user=app secret=" + pw,
		"app:" + pw + "@tcp(127.0.0.1:1)/x?parseTime=true",
		"app:p@ss" + pw + "@tcp(127.0.0.1:1)/x",
		"app:" + pw + "@tcp(127.0.0.1:1)/x?timeout=abc",
		"mysql://app:" + pw + "@tcp(127.0.0.1:1)/x",
		"mysql://app:" + pw + "@127.0.0.1:1/x",
		"mysql://app:p#" + pw + "@127.0.0.1:1/x",
		"mariadb://app:" + pw + "@127.0.0.1:1/x?tls=skip-verify",
		"mysql://app@127.0.0.1:1/x?password=" + pw,
		"app:" + pw + "@/x",
		"oracle://app:" + pw + "@127.0.0.1:1/x",
		"app:" + pw + "@127.0.0.1:1/x",
	}
}

func TestHostileDSNsShowNoPassword(t *testing.T) {
	t.Parallel()
	ds := hostileDSNs(pw)
	if len(ds) < 30 {
		t.Fatalf("only %d hostile DSNs", len(ds))
	}
	for _, dsn := range ds {
		t.Run(dsn, func(t *testing.T) {
			if got := DSN(dsn); strings.Contains(got, pw) {
				t.Errorf("DSN = %q", got)
			}
			if got := Text("cannot connect to "+dsn+": refused", dsn); strings.Contains(got, pw) {
				t.Errorf("Text = %q", got)
			}
		})
	}
}

func TestMisspelledKeysAreSecret(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"password", "pasword", "passwd", "pwd", "passwrd", "pssword", "PassWord", "sslpasword", "pw"} {
		if !SecretKey(k) {
			t.Errorf("%q not taken for a secret", k)
		}
	}
	for _, k := range []string{"host", "port", "user", "dbname", "sslmode", "application_name"} {
		if SecretKey(k) {
			t.Errorf("%q taken for a secret", k)
		}
	}
}
