package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/tether-php/tether/wire"
)

// Escapes from an HTTP upstream's base path, against a real nginx: the base
// is nginx's /base, whose sibling /admin answers "ADMIN". Each path of the
// path-traversal literature is first sent to nginx itself on a raw request
// line (Go's client would normalise it), as the control that shows which
// ones nginx resolves out of /base; then its part below the base goes through
// tetherd's http op. Nothing through tetherd may be answered from outside
// /base, and what tetherd refuses it must refuse as bad_request; a
// legitimate path that merely looks odd must still pass.
func init() {
	register(campaign{name: "http-escapes", title: "HTTP upstream: escapes from the base path, against nginx", run: runEscapes})
}

// escPath is a path to try, as nginx receives it (under /base/).
type escPath struct {
	path, how string
}

// escPaths are the escape attempts: what nginx does with each is the
// control's to find out.
var escPaths = []escPath{
	{"/base/../admin", "plain `..`"},
	{"/base/./../admin", "`.` then `..`"},
	{"/base/x/../../admin", "two levels"},
	{"/base/admin/../../admin", "two levels"},
	{"/base//../admin", "`//` then `..` (nginx merges slashes)"},
	{"/base/..", "`..` at the end"},
	{"/base/..?x", "`..` before the query"},
	{"/base/%2e%2e/admin", "encoded dots"},
	{"/base/%2E%2E/admin", "encoded dots, upper case"},
	{"/base/.%2e/admin", "one dot encoded"},
	{"/base/%2e./admin", "one dot encoded"},
	{"/base/.%2E/admin", "one dot encoded, upper case"},
	{"/base/x/%2e%2e/%2e%2e/admin", "encoded dots, two levels"},
	{"/base/%2e", "encoded `.`"},
	{"/base/..%2fadmin", "encoded slash"},
	{"/base/..%2Fadmin", "encoded slash, upper case"},
	{"/base/%2e%2e%2fadmin", "everything encoded"},
	{"/base/%2e%2E%2Fadmin", "everything encoded, mixed case"},
	{"/base/.%2e%2fadmin", "encoded slash, one dot encoded"},
	{"/base/..%2f..%2fadmin", "encoded slashes, above the root"},
	{"/base/x/..%2f..%2fadmin", "encoded slashes, two levels"},
	{"/base/x%2f..%2f..%2fadmin", "encoded slashes, one segment"},
	{"/base/..%2f%61dmin", "encoded slash and letter"},
	{"/base/..%2fadmin%3fx", "encoded slash and `?`"},
	{"/base/..%2fadmin;x", "encoded slash, `;` after"},
	{"/base/..%2f%2fadmin", "encoded slash, then an encoded `//`"},
	{"/base/..%2fADMIN", "encoded slash, to the catch-all"},
	{"/base/..%2f", "encoded slash, to the root"},
	{"/base/admin%2f..", "encoded slash before `..`"},
	{"/base/..%252fadmin", "double-encoded slash"},
	{"/base/%252e%252e/admin", "double-encoded dots"},
	{"/base/%c0%ae%c0%ae/admin", "overlong UTF-8 dots"},
	{"/base/..%c0%afadmin", "overlong UTF-8 slash"},
	{"/base/..%e0%80%afadmin", "overlong UTF-8 slash, 3 bytes"},
	{"/base/..%ef%bc%8fadmin", "full-width solidus"},
	{"/base/%u002e%u002e/admin", "IIS `%u` escapes"},
	{"/base/..\\admin", "backslash"},
	{"/base/..%5cadmin", "encoded backslash"},
	{"/base/..%255cadmin", "double-encoded backslash"},
	{"/base/..%c1%9cadmin", "overlong UTF-8 backslash"},
	{"/base/%ef%bc%8e%ef%bc%8e/admin", "full-width dots (NFKC folds them to `..`)"},
	{"/base/ok/..;/admin", "`..;` (Tomcat drops `;...`)"},
	{"/base/..;/admin", "`..;`"},
	{"/base/..%3b/admin", "`..` with an encoded `;`"},
	{"/base/;/../admin", "a `;` segment, then `..`"},
	{"/base/%2e%2e;x/admin", "encoded dots with `;x`"},
	{"/base/..%3f/admin", "`..` with an encoded `?`"},
	{"/base/..%3fx/../admin", "encoded `?`, then `..`"},
	{"/base/..%23/admin", "`..` with an encoded `#`"},
	{"/base/x#/../../admin", "a raw `#`, then `..`"},
	{"/base/x%0d%0aX-Injected:%201", "encoded CR LF (request splitting)"},
	{"/base/...%2fadmin", "three dots, encoded slash"},
	{"/base/..%2e/admin", "three dots, one encoded"},
	{"/base/%00", "NUL"},
	{"/base/x/..%00/../admin", "NUL in a segment"},
	{"/base/..%2fadmin%00", "encoded slash, NUL after"},
	{"/base/..%09/admin", "tab after `..`"},
}

// escLegit are paths that look odd but stay within the base: each must be
// answered through tetherd, by nginx's /base/ location, with this $uri.
var escLegit = []struct{ path, uri string }{
	{"/base/", "/base/"},
	{"/base/ok/file.txt", "/base/ok/file.txt"},
	{"/base/ok/%2e%2etxt", "/base/ok/..txt"}, // a name that starts with two dots, not a `..` segment
	{"/base/ok/..txt", "/base/ok/..txt"},
	{"/base/ok/...", "/base/ok/..."},
	{"/base/ok/%2e%2e%2e", "/base/ok/..."},
	{"/base/ok/x..", "/base/ok/x.."},
	{"/base/ok/.well-known/x", "/base/ok/.well-known/x"},
	{"/base/ok/a%20b", "/base/ok/a b"},
	{"/base/ok/%c3%a9", "/base/ok/é"},
	{"/base/ok/a;b=1", "/base/ok/a;b=1"},
	{"/base/ok/%25", "/base/ok/%"},
	{"/base/ok/%252e%252e/x", "/base/ok/%2e%2e/x"}, // nginx decodes once: a name
	{"/base/ok?next=/../admin", "/base/ok"},
	{"/base/ok?next=..%2f..%2fadmin", "/base/ok"},
}

// escAnswer is what one request was answered.
type escAnswer struct {
	status int
	body   string // its first line
	code   string // tetherd's error code, "" for an answer
	reason string // tetherd's refusal message, without the path
}

// outside reports whether the answer came from outside nginx's /base/
// location: /admin, or the catch-all.
func (a escAnswer) outside() bool {
	return a.code == "" && a.status != 0 && !strings.HasPrefix(a.body, "base /base/") && a.status != http.StatusBadRequest
}

func (a escAnswer) admin() bool { return a.code == "" && a.body == "ADMIN" }

func (a escAnswer) String() string {
	switch {
	case a.code != "":
		return fmt.Sprintf("refused `%s`: %s", a.code, a.reason)
	case a.status == 0:
		return "no answer: " + a.body
	case a.status == http.StatusBadRequest:
		return "400 Bad Request"
	}
	return fmt.Sprintf("%d %s", a.status, escPrintable(a.body))
}

func runEscapes(e *env, r *report) error {
	if err := e.startTetherd(2, ""); err != nil {
		return err
	}
	r.say("nginx routes `/base/` to an answer `base <uri>` (nginx's decoded, normalised `$uri`) and `/admin` to `ADMIN`; "+
		"tetherd's backend `web` has the base URL `%s/base`. Each path is sent to nginx itself on a raw request line "+
		"(the control: which ones nginx resolves out of `/base/`), then its part below `/base` (the `path` of tetherd's "+
		"`http` op) through tetherd.", e.nginxURL)
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.close()
	var rows [][]string
	var controlAdmin, controlOutside, viaAdmin, viaOutside, refused, untyped int
	var leaks, badCodes []string
	for _, p := range escPaths {
		direct, err := escDirect(e.nginxURL, p.path)
		if err != nil {
			return err
		}
		via, err := escVia(c, strings.TrimPrefix(p.path, "/base"))
		if err != nil {
			return err
		}
		if direct.admin() {
			controlAdmin++
		}
		if direct.outside() {
			controlOutside++
		}
		if via.admin() {
			viaAdmin++
		}
		if via.outside() {
			viaOutside++
			leaks = append(leaks, p.path)
		}
		if via.code != "" {
			refused++
			if via.code != "bad_request" {
				untyped++
				badCodes = append(badCodes, p.path+": "+via.code)
			}
		}
		rows = append(rows, []string{"`" + p.path + "`", p.how, direct.String(), via.String()})
	}
	r.table([]string{"path sent to nginx", "technique", "nginx, directly", "through tetherd (path without /base)"}, rows)
	r.say("%d paths: nginx itself serves `ADMIN` for %d of them and answers from outside `/base/` for %d; through "+
		"tetherd %d are refused, %d answered from outside `/base/`.", len(escPaths), controlAdmin, controlOutside, refused, viaOutside)

	rows = nil
	var legitBad []string
	for _, l := range escLegit {
		want := "base " + l.uri
		direct, err := escDirect(e.nginxURL, l.path)
		if err != nil {
			return err
		}
		via, err := escVia(c, strings.TrimPrefix(l.path, "/base"))
		if err != nil {
			return err
		}
		if via.code != "" || via.status != http.StatusOK || via.body != want {
			legitBad = append(legitBad, fmt.Sprintf("%s: %s", l.path, via))
		}
		rows = append(rows, []string{"`" + l.path + "`", escPrintable(want), direct.String(), via.String()})
	}
	r.say("Legitimate paths: odd, but they stay within `/base/` however nginx decodes them.")
	r.table([]string{"path sent to nginx", "nginx should answer", "nginx, directly", "through tetherd"}, rows)

	direct1, _ := escDirect(e.nginxURL, "/base/..%2fadmin")
	direct2, _ := escDirect(e.nginxURL, "/base/../admin")
	r.check(direct1.admin() && direct2.admin() && controlAdmin >= 10, "the control: nginx itself serves ADMIN for the escapes "+
		"(%d of %d paths, `..%%2f` and `../` among them)", controlAdmin, len(escPaths))
	r.check(viaAdmin == 0, "no request through tetherd reaches /admin (%d ADMIN answers)", viaAdmin)
	r.check(viaOutside == 0, "no request through tetherd is answered from outside /base/ (%d%s)", viaOutside, escList(leaks))
	r.check(untyped == 0, "every refusal is a typed bad_request (%d of %d otherwise%s)", untyped, refused, escList(badCodes))
	r.check(len(legitBad) == 0, "every legitimate path answered through tetherd as nginx answers it (%d of %d not%s)",
		len(legitBad), len(escLegit), escList(legitBad))
	r.check(e.alive(), "tetherd is still running")
	return nil
}

// escDirect sends path to nginx on a raw request line and returns its answer.
func escDirect(nginxURL, path string) (escAnswer, error) {
	host := strings.TrimPrefix(nginxURL, "http://")
	conn, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		return escAnswer{}, fmt.Errorf("dial nginx: %w", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n"); err != nil {
		return escAnswer{}, fmt.Errorf("write to nginx: %w", err)
	}
	// Not http.ReadResponse either: it would do no harm, but a raw read
	// shows a connection nginx closed without answering as it is.
	b, err := io.ReadAll(bufio.NewReader(conn))
	if len(b) == 0 {
		return escAnswer{body: fmt.Sprintf("closed (%v)", err)}, nil
	}
	head, body, _ := strings.Cut(string(b), "\r\n\r\n")
	var a escAnswer
	if _, err := fmt.Sscanf(head, "HTTP/1.1 %d", &a.status); err != nil {
		return escAnswer{body: "not HTTP: " + escPrintable(head)}, nil
	}
	a.body, _, _ = strings.Cut(body, "\n")
	return a, nil
}

// escVia sends path through tetherd's http op on backend web.
func escVia(c *client, path string) (escAnswer, error) {
	rep, err := c.do(wire.Request{Op: wire.OpHTTP, Backend: "web", Path: path, TimeoutMS: 5000}, 10*time.Second)
	if code := errCode(rep); code != "" {
		msg := fmt.Sprint(rep.Error()["message"])
		if i := strings.Index(msg, `": `); i >= 0 && strings.HasPrefix(msg, "http: path ") {
			msg = msg[i+3:]
		}
		return escAnswer{code: code, reason: escPrintable(msg)}, nil
	}
	if err != nil {
		return escAnswer{}, fmt.Errorf("http %s through tetherd: %w", path, err)
	}
	a := escAnswer{status: int(toUint(rep.Fields["status"]))}
	switch b := rep.Fields["body"].(type) {
	case []byte:
		a.body = string(b)
	case string:
		a.body = b
	}
	a.body, _, _ = strings.Cut(a.body, "\n")
	return a, nil
}

// escList returns ": a; b" for a list, "" for none.
func escList(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	return ": " + escPrintable(strings.Join(xs, "; "))
}

// escPrintable makes s safe in a markdown table: bytes outside printable
// ASCII as \xNN, and | escaped.
func escPrintable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '|':
			b.WriteString(`\|`)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
