package tick

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// EventKind tells quote events from status events; anything else is EventOther and ignored.
type EventKind uint8

const (
	EventOther  EventKind = iota
	EventQuote            // "ev":"C"
	EventStatus           // "ev":"status"
)

// Event is one decoded provider event. Byte slices alias the frame passed to Decode (or, for a
// string with escapes, a fresh copy) and are valid until the next Decode on the same Decoder.
type Event struct {
	Kind    EventKind
	Pair    []byte // quote: "EUR/USD"
	Bid     float64
	Ask     float64
	HasBid  bool
	HasAsk  bool
	TimeMs  int64  // provider time, Unix milliseconds; 0 when absent or null
	Status  []byte // status: "market_closed", "auth_success", …
	Message []byte // status: free text, or the pair for market_open / market_closed
}

// Reject is why a quote event is not stored.
type Reject uint8

const (
	RejectNone        Reject = iota
	RejectUndated            // t missing, null, zero or negative: the quote cannot be dated
	RejectNonPositive        // bid or ask missing, zero, negative or not finite
	RejectCrossed            // bid above ask
)

func (r Reject) String() string {
	switch r {
	case RejectNone:
		return "none"
	case RejectUndated:
		return "undated"
	case RejectNonPositive:
		return "non_positive"
	case RejectCrossed:
		return "crossed"
	}
	return "unknown"
}

// Validate decides whether a quote event may be stored. It is the only gate between the wire and
// the quote map, and the fuzz test holds it to that.
func Validate(e *Event) Reject {
	switch {
	case e.TimeMs <= 0:
		return RejectUndated
	case !e.HasBid || !e.HasAsk || !(e.Bid > 0) || !(e.Ask > 0) || math.IsInf(e.Bid, 0) || math.IsInf(e.Ask, 0):
		return RejectNonPositive
	case e.Bid > e.Ask:
		return RejectCrossed
	}
	return RejectNone
}

// maxDepth bounds nesting in ignored values, so a hostile frame cannot exhaust the stack.
const maxDepth = 32

// Decoder decodes provider frames, reusing its event slice across calls so the steady state
// allocates nothing. A Decoder is not safe for concurrent use.
type Decoder struct {
	events []Event
}

// Decode parses one frame: a JSON array of event objects (or a single object). A frame that is not
// well-formed JSON of that shape is rejected whole — no event from it is returned — so a
// truncated or corrupted frame can never half-apply. Fields of unexpected type on the fields this
// decoder reads ("ev", "p", "a", "b", "t", "status", "message") also reject the frame; other
// fields are skipped whatever they hold.
func (d *Decoder) Decode(frame []byte) ([]Event, error) {
	d.events = d.events[:0]
	p := parser{b: frame}
	p.ws()
	if p.i >= len(p.b) {
		return nil, errors.New("decode frame: empty")
	}
	switch p.b[p.i] {
	case '[':
		p.i++
		p.ws()
		if p.peek() == ']' {
			p.i++
			break
		}
		for {
			if err := d.object(&p); err != nil {
				return nil, err
			}
			p.ws()
			c := p.peek()
			p.i++
			if c == ']' {
				break
			}
			if c != ',' {
				return nil, p.fail("',' or ']' after event")
			}
			p.ws()
		}
	case '{':
		if err := d.object(&p); err != nil {
			return nil, err
		}
	default:
		return nil, p.fail("'[' or '{' to start a frame")
	}
	p.ws()
	if p.i != len(p.b) {
		return nil, p.fail("end of frame")
	}
	return d.events, nil
}

func (d *Decoder) object(p *parser) error {
	if p.peek() != '{' {
		return p.fail("'{' to start an event")
	}
	p.i++
	var e Event
	var ev []byte
	p.ws()
	if p.peek() == '}' {
		p.i++
		d.events = append(d.events, e)
		return nil
	}
	for {
		key, err := p.key()
		if err != nil {
			return err
		}
		switch string(key) {
		case "ev":
			ev, err = p.str()
		case "p":
			e.Pair, err = p.str()
		case "status":
			e.Status, err = p.str()
		case "message":
			e.Message, err = p.str()
		case "a":
			e.Ask, e.HasAsk, err = p.nullableFloat()
		case "b":
			e.Bid, e.HasBid, err = p.nullableFloat()
		case "t":
			e.TimeMs, err = p.millis()
		default:
			err = p.skip(0)
		}
		if err != nil {
			return err
		}
		p.ws()
		c := p.peek()
		p.i++
		if c == '}' {
			break
		}
		if c != ',' {
			return p.fail("',' or '}' in event")
		}
	}
	switch string(ev) {
	case "C":
		e.Kind = EventQuote
	case "status":
		e.Kind = EventStatus
	}
	d.events = append(d.events, e)
	return nil
}

type parser struct {
	b []byte
	i int
}

func (p *parser) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) fail(want string) error {
	if p.i >= len(p.b) {
		return fmt.Errorf("decode frame: want %s, frame ends at byte %d", want, len(p.b))
	}
	return fmt.Errorf("decode frame: want %s at byte %d", want, p.i)
}

// str reads a JSON string. The common case (no escapes) aliases the frame; escapes take the slow,
// allocating path through encoding/json, which is exact about JSON's escape rules.
func (p *parser) str() ([]byte, error) {
	if p.peek() != '"' {
		return nil, p.fail("a string")
	}
	start := p.i
	p.i++
	escaped := false
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if !escaped {
				return p.b[start+1 : p.i-1], nil
			}
			var s string
			if err := json.Unmarshal(p.b[start:p.i], &s); err != nil {
				return nil, fmt.Errorf("decode frame: string at byte %d: %w", start, err)
			}
			return []byte(s), nil
		case c == '\\':
			escaped = true
			p.i += 2
		case c < 0x20:
			return nil, p.fail("no control characters in a string")
		default:
			p.i++
		}
	}
	return nil, p.fail("closing '\"'")
}

// key reads an object key and the ':' after it, with the white space around both.
func (p *parser) key() ([]byte, error) {
	p.ws()
	k, err := p.str()
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.peek() != ':' {
		return nil, p.fail("':' after key")
	}
	p.i++
	p.ws()
	return k, nil
}

// number returns the bytes of a JSON number, checked against the JSON grammar.
func (p *parser) number() ([]byte, error) {
	start := p.i
	if p.peek() == '-' {
		p.i++
	}
	switch c := p.peek(); {
	case c == '0':
		p.i++
	case c >= '1' && c <= '9':
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
	default:
		return nil, p.fail("a number")
	}
	if p.peek() == '.' {
		p.i++
		n := p.i
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
		if p.i == n {
			return nil, p.fail("a digit after '.'")
		}
	}
	if c := p.peek(); c == 'e' || c == 'E' {
		p.i++
		if c := p.peek(); c == '+' || c == '-' {
			p.i++
		}
		n := p.i
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
		if p.i == n {
			return nil, p.fail("a digit in the exponent")
		}
	}
	return p.b[start:p.i], nil
}

// literal consumes word (true, false, null) if it is next.
func (p *parser) literal(word string) bool {
	if len(p.b)-p.i >= len(word) && string(p.b[p.i:p.i+len(word)]) == word {
		p.i += len(word)
		return true
	}
	return false
}

// nullableFloat reads a number or null (absent). A number out of float64 range is absent too:
// Validate then rejects the quote as non-positive instead of storing an infinity.
func (p *parser) nullableFloat() (float64, bool, error) {
	if p.literal("null") {
		return 0, false, nil
	}
	b, err := p.number()
	if err != nil {
		return 0, false, err
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return 0, false, nil
	}
	return f, true, nil
}

// millis reads the provider timestamp: an integer (or a number with an integral value) of Unix
// milliseconds. null, a fraction below one, or a value out of range reads as 0: undated.
func (p *parser) millis() (int64, error) {
	if p.literal("null") {
		return 0, nil
	}
	b, err := p.number()
	if err != nil {
		return 0, err
	}
	if n, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	// 2^53 ms is about 285,000 years: anything beyond it is not a date.
	if err != nil || math.IsNaN(f) || f < 1 || f > 1<<53 {
		return 0, nil
	}
	return int64(f), nil
}

// skip consumes any JSON value without keeping it.
func (p *parser) skip(depth int) error {
	if depth > maxDepth {
		return p.fail(fmt.Sprintf("nesting below %d levels", maxDepth))
	}
	switch c := p.peek(); {
	case c == '"':
		_, err := p.str()
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := p.number()
		return err
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		p.i++
		p.ws()
		if p.peek() == closer {
			p.i++
			return nil
		}
		for {
			p.ws()
			if closer == '}' {
				if _, err := p.key(); err != nil {
					return err
				}
			}
			if err := p.skip(depth + 1); err != nil {
				return err
			}
			p.ws()
			c := p.peek()
			p.i++
			if c == closer {
				return nil
			}
			if c != ',' {
				return p.fail("',' or a closing bracket")
			}
		}
	case p.literal("true"), p.literal("false"), p.literal("null"):
		return nil
	}
	return p.fail("a value")
}
