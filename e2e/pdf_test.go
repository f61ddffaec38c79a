package e2e

import (
	"bytes"
	"compress/zlib"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
)

// pdfPages is the text of each page of a PDF as Chromium prints one (Skia: plain objects and a
// cross-reference table, Flate content streams, Type0 fonts with a ToUnicode map), in page
// order. It reads what a test needs to say which text landed on which page, no more: it is not
// a general PDF reader, and it fails loudly on anything it does not know.
func pdfPages(raw []byte) ([]string, error) {
	objs, err := pdfObjects(raw)
	if err != nil {
		return nil, err
	}
	ref := regexp.MustCompile(`(\d+) 0 R`)
	var root *pdfObject
	for _, o := range objs {
		if bytes.Contains(o.dict, []byte("/Type /Pages")) && !bytes.Contains(o.dict, []byte("/Parent")) {
			root = o
		}
	}
	if root == nil {
		return nil, fmt.Errorf("pdf: no page tree")
	}
	kids := regexp.MustCompile(`/Kids \[([^\]]*)\]`).FindSubmatch(root.dict)
	if kids == nil {
		return nil, fmt.Errorf("pdf: page tree without kids: %s", root.dict)
	}
	var pages []string
	cmaps := map[int]map[string]string{}
	for _, m := range ref.FindAllSubmatch(kids[1], -1) {
		page := objs[atoi(m[1])]
		if page == nil || !regexp.MustCompile(`/Type /Page\b`).Match(page.dict) {
			return nil, fmt.Errorf("pdf: kid %s is not a page (nested page trees are not read)", m[1])
		}
		// The page's fonts by resource name, each with its ToUnicode map.
		fonts := map[string]map[string]string{}
		if f := regexp.MustCompile(`/Font <<([^>]*)>>`).FindSubmatch(page.dict); f != nil {
			for _, fm := range regexp.MustCompile(`/(\w+) (\d+) 0 R`).FindAllSubmatch(f[1], -1) {
				font := objs[atoi(fm[2])]
				tu := regexp.MustCompile(`/ToUnicode (\d+) 0 R`).FindSubmatch(font.dict)
				if font == nil || tu == nil {
					return nil, fmt.Errorf("pdf: font %s has no ToUnicode map", fm[2])
				}
				n := atoi(tu[1])
				if cmaps[n] == nil {
					data, err := objs[n].data()
					if err != nil {
						return nil, err
					}
					cmaps[n] = pdfCMap(data)
				}
				fonts[string(fm[1])] = cmaps[n]
			}
		}
		contents := regexp.MustCompile(`/Contents (\d+) 0 R`).FindSubmatch(page.dict)
		if contents == nil {
			return nil, fmt.Errorf("pdf: page without one content stream: %s", page.dict)
		}
		data, err := objs[atoi(contents[1])].data()
		if err != nil {
			return nil, err
		}
		pages = append(pages, pdfText(data, fonts))
	}
	return pages, nil
}

type pdfObject struct {
	dict   []byte
	stream []byte // nil without one
}

// data is the object's stream, inflated when it is Flate-encoded.
func (o *pdfObject) data() ([]byte, error) {
	if o == nil || o.stream == nil {
		return nil, fmt.Errorf("pdf: not a stream")
	}
	if !bytes.Contains(o.dict, []byte("/Filter /FlateDecode")) {
		return o.stream, nil
	}
	r, err := zlib.NewReader(bytes.NewReader(o.stream))
	if err != nil {
		return nil, fmt.Errorf("pdf: inflate: %w", err)
	}
	return io.ReadAll(r)
}

// pdfObjects reads every "N 0 obj … endobj", skipping each stream by its /Length.
func pdfObjects(raw []byte) (map[int]*pdfObject, error) {
	head := regexp.MustCompile(`(?m)^(\d+) 0 obj\s*`)
	length := regexp.MustCompile(`/Length (\d+)\b`)
	objs := map[int]*pdfObject{}
	for pos := 0; ; {
		m := head.FindSubmatchIndex(raw[pos:])
		if m == nil {
			break
		}
		id := atoi(raw[pos+m[2] : pos+m[3]])
		body := pos + m[1]
		end := bytes.Index(raw[body:], []byte("endobj"))
		st := bytes.Index(raw[body:], []byte("stream"))
		if end < 0 {
			return nil, fmt.Errorf("pdf: object %d has no end", id)
		}
		o := &pdfObject{}
		if st >= 0 && st < end {
			o.dict = raw[body : body+st]
			l := length.FindSubmatch(o.dict)
			if l == nil {
				return nil, fmt.Errorf("pdf: stream %d without a direct /Length", id)
			}
			start := body + st + len("stream")
			if raw[start] == '\r' {
				start++
			}
			if raw[start] == '\n' {
				start++
			}
			n := atoi(l[1])
			if start+n > len(raw) {
				return nil, fmt.Errorf("pdf: stream %d runs past the file", id)
			}
			o.stream = raw[start : start+n]
			pos = start + n
			e := bytes.Index(raw[pos:], []byte("endobj"))
			if e < 0 {
				return nil, fmt.Errorf("pdf: stream %d has no end", id)
			}
			pos += e + len("endobj")
		} else {
			o.dict = raw[body : body+end]
			pos = body + end + len("endobj")
		}
		objs[id] = o
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("pdf: no objects")
	}
	return objs, nil
}

// pdfCMap reads a ToUnicode map: source code (hex) → text.
func pdfCMap(data []byte) map[string]string {
	out := map[string]string{}
	hexes := regexp.MustCompile(`<([0-9A-Fa-f]+)>`)
	for _, block := range regexp.MustCompile(`(?s)beginbfchar(.*?)endbfchar`).FindAllSubmatch(data, -1) {
		hs := hexes.FindAllSubmatch(block[1], -1)
		for i := 0; i+1 < len(hs); i += 2 {
			out[strings.ToUpper(string(hs[i][1]))] = utf16Hex(string(hs[i+1][1]))
		}
	}
	line := regexp.MustCompile(`<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>\s*(<[0-9A-Fa-f]+>|\[[^\]]*\])`)
	for _, block := range regexp.MustCompile(`(?s)beginbfrange(.*?)endbfrange`).FindAllSubmatch(data, -1) {
		for _, r := range line.FindAllSubmatch(block[1], -1) {
			lo, _ := strconv.ParseUint(string(r[1]), 16, 32)
			hi, _ := strconv.ParseUint(string(r[2]), 16, 32)
			width := len(r[1])
			list := hexes.FindAllSubmatch(r[3], -1)
			for c := lo; c <= hi; c++ {
				code := strings.ToUpper(fmt.Sprintf("%0*x", width, c))
				if r[3][0] == '[' {
					if int(c-lo) < len(list) {
						out[code] = utf16Hex(string(list[c-lo][1]))
					}
					continue
				}
				// A range maps to consecutive characters from its first.
				first := []rune(utf16Hex(string(list[0][1])))
				if len(first) > 0 {
					first[len(first)-1] += rune(c - lo)
				}
				out[code] = string(first)
			}
		}
	}
	return out
}

func utf16Hex(h string) string {
	b, _ := hex.DecodeString(h)
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		u = append(u, uint16(b[i])<<8|uint16(b[i+1]))
	}
	return string(utf16.Decode(u))
}

// pdfText is the text a content stream shows, through its fonts' maps (two-byte codes, as
// Identity-H writes them). Each text object and each move inside one adds a space.
func pdfText(c []byte, fonts map[string]map[string]string) string {
	var sb strings.Builder
	var font map[string]string
	var operands []string // names and hex strings since the last operator
	delim := func(b byte) bool { return strings.IndexByte(" \t\r\n\f\x00/<>[]()%", b) >= 0 }
	for i := 0; i < len(c); {
		switch ch := c[i]; {
		case ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' || ch == '\f' || ch == 0 || ch == '[' || ch == ']' || ch == '>':
			i++
		case ch == '%':
			for i < len(c) && c[i] != '\n' {
				i++
			}
		case ch == '/':
			j := i + 1
			for j < len(c) && !delim(c[j]) {
				j++
			}
			operands = append(operands, "/"+string(c[i+1:j]))
			i = j
		case ch == '<' && i+1 < len(c) && c[i+1] == '<':
			i += 2
		case ch == '<':
			j := bytes.IndexByte(c[i:], '>')
			if j < 0 {
				return sb.String()
			}
			operands = append(operands, "<"+strings.ToUpper(string(c[i+1:i+j])))
			i += j + 1
		case ch == '(':
			// Literal strings are not how Skia writes text; skip one, nesting and escapes.
			depth := 0
			for ; i < len(c); i++ {
				if c[i] == '\\' {
					i++
					continue
				}
				if c[i] == '(' {
					depth++
				} else if c[i] == ')' {
					depth--
					if depth == 0 {
						i++
						break
					}
				}
			}
		default:
			j := i
			for j < len(c) && !delim(c[j]) {
				j++
			}
			if j == i {
				j++
			}
			tok := string(c[i:j])
			i = j
			if _, err := strconv.ParseFloat(tok, 64); err == nil {
				continue // a number operand
			}
			switch tok {
			case "Tf":
				for _, o := range operands {
					if strings.HasPrefix(o, "/") {
						font = fonts[o[1:]]
					}
				}
			case "Tj", "TJ", "'", "\"":
				for _, o := range operands {
					if !strings.HasPrefix(o, "<") {
						continue
					}
					h := o[1:]
					for k := 0; k+4 <= len(h); k += 4 {
						sb.WriteString(font[h[k:k+4]])
					}
				}
			case "BT", "ET", "Td", "TD", "T*", "Tm":
				sb.WriteByte(' ')
			}
			operands = operands[:0]
		}
	}
	return sb.String()
}

func atoi(b []byte) int {
	n, _ := strconv.Atoi(string(b))
	return n
}
