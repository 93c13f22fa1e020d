package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
)

// decodeJSON reads exactly one JSON object into dst, a pointer to a request
// struct, refusing other media types, unknown fields, trailing data and
// bodies over the limit, each saying what to fix. It is parsed twice: keys, then dst.
func decodeJSON(r *http.Request, dst any) error {
	// Also catches an empty body sent without a type, which requireJSON passes.
	if err := checkJSONType(r); err != nil {
		return err
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return jsonError(err)
	}
	if err := checkKeys(data, reflect.TypeOf(dst).Elem(), ""); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return badRequest("request body must hold exactly one JSON value")
	}
	return nil
}

// checkKeys refuses what encoding/json would silently accept in an object of
// struct type st or of its struct fields (keys named by their path, prefix):
// a key given twice, and one matching a field only case-insensitively
// ({"STOCK":1} would fill "stock"). Malformed JSON is left to the decoder.
func checkKeys(data []byte, st reflect.Type, prefix string) error {
	fields := jsonFields(st)
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := make(map[string]bool, len(fields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		ft, known := fields[key]
		switch {
		case seen[key]:
			return badRequest(fmt.Sprintf("duplicate field %q", prefix+key))
		case !known:
			for f := range fields {
				if strings.EqualFold(f, key) {
					return badRequest(fmt.Sprintf("unknown field %q (field names are case-sensitive: did you mean %q?)", prefix+key, prefix+f))
				}
			}
			return badRequest(fmt.Sprintf("unknown field %q", prefix+key))
		}
		seen[key] = true
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil
		}
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			if err := checkKeys(value, ft, prefix+key+"."); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonFields are the JSON names of struct type st's fields, with their types.
func jsonFields(st reflect.Type) map[string]reflect.Type {
	fields := make(map[string]reflect.Type, st.NumField())
	for sf := range st.Fields() {
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = sf.Name
		}
		fields[name] = sf.Type
	}
	return fields
}

// jsonError explains a decoding failure (an unknown field by its message prefix).
func jsonError(err error) error {
	var (
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		ute *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return errBodyTooLarge(mbe.Limit)
	case errors.Is(err, io.EOF):
		return badRequest("request body is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("request body is truncated JSON")
	case errors.As(err, &se):
		return badRequest(fmt.Sprintf("malformed JSON at byte %d: %s", se.Offset, se.Error()))
	case errors.As(err, &ute):
		if ute.Field == "" {
			return badRequest("request body must be a JSON object")
		}
		return badRequest(fmt.Sprintf("%s must be %s, got %s", ute.Field, kindName(ute.Type), ute.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest(strings.TrimPrefix(err.Error(), "json: "))
	}
	return badRequest("malformed JSON")
}

func kindName(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprintf("an integer that fits %d bits", t.Bits())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Pointer:
		return kindName(t.Elem())
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another type" // never a Go type's name: the client sees it
}

// handle adapts an endpoint that returns its error, which fail answers.
func (a *api) handle(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			a.fail(w, r, err)
		}
	}
}

func (a *api) withID(name string, h func(http.ResponseWriter, *http.Request, int64) error) http.HandlerFunc {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, name)
		if err != nil {
			return err
		}
		return h(w, r, id)
	})
}

// pathID parses a positive int64 path parameter: decimal digits only.
func pathID(r *http.Request, name string) (int64, error) {
	s := chi.URLParam(r, name)
	if !allDigits(s) {
		return 0, badRequest(name + " must be a positive integer")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, badRequest(name + " is out of range (max 9223372036854775807)")
	case err != nil, n <= 0:
		return 0, badRequest(name + " must be a positive integer")
	}
	return n, nil
}

// allDigits: s is decimal digits only, or empty (ParseInt takes a sign).
func allDigits(s string) bool {
	return !strings.ContainsFunc(s, func(c rune) bool { return c < '0' || c > '9' })
}
