package driver

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// File is a query parameter naming a file (a CA bundle, a client
// certificate): DecodeQuery refuses a path that names no readable regular
// file, before any network call.
type File string

// TLSFiles are the TLS parameters of a URL: cacert= (the authorities to
// check the server's certificate against instead of the system's roots),
// cert= and key= (a client certificate, both or neither). A store's
// parameter struct embeds them with a tag that may restrict them to its
// TLS schemes: `param:",scheme=etcds"`.
type TLSFiles struct {
	CACert File `param:"cacert"`
	Cert   File `param:"cert"`
	Key    File `param:"key"`
}

// Any reports whether the URL names a TLS file.
func (f TLSFiles) Any() bool { return f != TLSFiles{} }

// Config is TLSFromFiles of the files.
func (f TLSFiles) Config() (*tls.Config, error) {
	return TLSFromFiles(string(f.CACert), string(f.Cert), string(f.Key))
}

// ParamError is DecodeQuery's error: a query parameter it refuses. It
// matches ErrInvalid.
type ParamError struct {
	Scheme   string   // the URL's scheme, lower case
	Param    string   // the parameter refused
	Reason   string   // why, for people
	Accepted []string // the store's parameters, when Param is unknown
	Passed   []string // the client library's, which the URL takes too
}

func (e *ParamError) Error() string {
	msg := fmt.Sprintf("%s: %s URL: %s", ErrInvalid.Error(), e.Scheme, e.Reason)
	switch {
	case len(e.Passed) > 0:
		msg += " (accepted: " + strings.Join(e.Accepted, ", ") + "; and the client library's: " + strings.Join(e.Passed, ", ") + ")"
	case len(e.Accepted) > 0:
		msg += " (accepted: " + strings.Join(e.Accepted, ", ") + ")"
	}
	return msg
}

// Unwrap makes a ParamError match ErrInvalid.
func (e *ParamError) Unwrap() error { return ErrInvalid }

// DecodeQuery decodes u's query into the fields of the struct dst points
// to, each the parameter its `param:"NAME[,OPTIONS]"` tag names (the tag
// syntax and field types: docs/writing-a-store.md, "Opening by URL"). A
// value already in dst is the default. The parameters named in pass are
// the client library's: DecodeQuery returns them untouched (at most once
// each). Any other unknown, repeated or unparsable parameter, or an
// unparsable query, returns a *ParamError (matching ErrInvalid) naming it;
// an unknown one lists the accepted ones.
func DecodeQuery(u *url.URL, dst any, pass ...string) (url.Values, error) {
	scheme := strings.ToLower(u.Scheme)
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, &ParamError{Scheme: scheme, Reason: "query: " + err.Error()}
	}
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic("driver.DecodeQuery: dst must point to a struct")
	}
	fields := paramFields(v.Elem())
	rest := url.Values{}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range q {
			if !yield(n) {
				return
			}
		}
	})
	for _, name := range names {
		vals := q[name]
		f, ok := fields[name]
		if !ok && !slices.Contains(pass, name) {
			return nil, &ParamError{Scheme: scheme, Param: name, Reason: fmt.Sprintf("unknown parameter %q", name), Accepted: accepted(fields), Passed: pass}
		}
		if len(vals) > 1 && (!ok || f.v.Kind() != reflect.Slice) {
			return nil, &ParamError{Scheme: scheme, Param: name, Reason: fmt.Sprintf("%s= given %d times: give it once", name, len(vals))}
		}
		if !ok {
			rest[name] = vals
			continue
		}
		bad := func(format string, args ...any) error {
			return &ParamError{Scheme: scheme, Param: name, Reason: name + "=" + fmt.Sprintf(format, args...)}
		}
		if len(f.schemes) > 0 && !slices.Contains(f.schemes, scheme) {
			return nil, &ParamError{Scheme: scheme, Param: name, Reason: fmt.Sprintf("%s= is not a parameter of %s:// (only of %s)", name, scheme, strings.Join(f.schemes, "://, ")+"://")}
		}
		if err := f.set(vals, bad); err != nil {
			return nil, err
		}
	}
	for _, name := range names {
		f, ok := fields[name]
		if !ok || f.when == "" {
			continue
		}
		other, okOther := fields[f.when]
		if !okOther {
			panic("driver.DecodeQuery: when= names no parameter: " + f.when)
		}
		if have := fmt.Sprint(other.v.Interface()); !slices.Contains(f.whenIn, have) {
			return nil, &ParamError{Scheme: scheme, Param: name, Reason: fmt.Sprintf("%s= applies to %s=%s, not to %s=%s", name, f.when, strings.Join(f.whenIn, " or "), f.when, have)}
		}
	}
	return rest, nil
}

// paramField is one tagged field of DecodeQuery's dst.
type paramField struct {
	v                  reflect.Value
	positive, nonempty bool
	oneof, schemes     []string
	when               string
	whenIn             []string
}

var durationType = reflect.TypeFor[time.Duration]()

func paramFields(s reflect.Value) map[string]*paramField {
	out := map[string]*paramField{}
	addFields(out, s, nil)
	return out
}

// addFields adds the tagged fields of the struct s to out, with the tag
// options outer (those of the field s is) before their own.
func addFields(out map[string]*paramField, s reflect.Value, outer []string) {
	for i := range s.NumField() {
		tag, ok := s.Type().Field(i).Tag.Lookup("param")
		if !ok {
			continue
		}
		parts := strings.Split(tag, ",")
		if s.Field(i).Kind() == reflect.Struct && parts[0] == "" {
			addFields(out, s.Field(i), append(slices.Clip(outer), parts[1:]...))
			continue
		}
		f := &paramField{v: s.Field(i)}
		for _, opt := range append(slices.Clip(outer), parts[1:]...) {
			k, val, _ := strings.Cut(opt, "=")
			switch k {
			case "":
			case "positive":
				f.positive = true
			case "nonempty":
				f.nonempty = true
			case "oneof":
				f.oneof = strings.Split(val, "|")
			case "scheme":
				f.schemes = strings.Split(val, "|")
			case "when":
				other, in, _ := strings.Cut(val, ":")
				f.when, f.whenIn = other, strings.Split(in, "|")
			default:
				panic("driver.DecodeQuery: unknown tag option " + opt)
			}
		}
		out[parts[0]] = f
	}
}

func accepted(fields map[string]*paramField) []string {
	var out []string
	for n := range fields {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// set decodes vals into the field.
func (f *paramField) set(vals []string, bad func(string, ...any) error) error {
	s := vals[0]
	if f.nonempty && s == "" {
		return bad("%q: give a value, or leave the parameter out for the default", s)
	}
	if f.oneof != nil && !slices.Contains(f.oneof, s) {
		return bad("%q: want %s", s, strings.Join(f.oneof, " or "))
	}
	switch {
	case f.v.Type() == durationType:
		d, err := time.ParseDuration(s)
		if err != nil || f.positive && d <= 0 {
			return bad("%q is not a %sduration (such as 5s)", s, positive(f.positive))
		}
		f.v.SetInt(int64(d))
	case f.v.Type() == reflect.TypeFor[File]():
		if st, err := os.Stat(s); err != nil || !st.Mode().IsRegular() {
			return bad("%q: no such file", s)
		}
		f.v.SetString(s)
	case f.v.Kind() == reflect.String:
		f.v.SetString(s)
	case f.v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return bad("%q: want true or false", s)
		}
		f.v.SetBool(b)
	case f.v.Kind() == reflect.Int:
		n, err := strconv.Atoi(s)
		if err != nil || f.positive && n <= 0 {
			return bad("%q is not a %swhole number", s, positive(f.positive))
		}
		f.v.SetInt(int64(n))
	case f.v.Kind() == reflect.Float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || f.positive && x <= 0 {
			return bad("%q is not a %snumber", s, positive(f.positive))
		}
		f.v.SetFloat(x)
	case f.v.Kind() == reflect.Slice && f.v.Type().Elem().Kind() == reflect.String:
		f.v.Set(reflect.ValueOf(slices.Clone(vals)))
	default:
		panic("driver.DecodeQuery: unsupported field type " + f.v.Type().String())
	}
	return nil
}

func positive(p bool) string {
	if p {
		return "positive "
	}
	return ""
}
