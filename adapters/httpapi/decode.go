package httpapi

import (
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

// decodeJSON reads exactly one JSON object into dst, refusing other media
// types, unknown fields, trailing data and bodies over the limit, each with a
// message that tells the client what to fix.
func decodeJSON(r *http.Request, dst any) error {
	// requireJSON already refused a body of another type; this catches a
	// handler reached some other way, and an empty body sent without a type.
	if err := checkJSONType(r); err != nil {
		return err
	}
	if r.Body == nil {
		return badRequest("request body is empty")
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	var extra json.RawMessage
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
		return nil
	case isTooLarge(err):
		return jsonError(err)
	default:
		return badRequest("request body must hold exactly one JSON value")
	}
}

func isTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// jsonError explains a decoding failure. encoding/json has no typed error for
// an unknown field, so that one is recognised by its stable message prefix.
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
	}
	return t.String()
}

// pathID parses a positive int64 path parameter. Only decimal digits pass:
// signs, spaces and anything beyond int64 are refused before a use case sees
// them.
func pathID(r *http.Request, name string) (int64, error) {
	s := chi.URLParam(r, name)
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, badRequest(name + " must be a positive integer")
		}
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
