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
