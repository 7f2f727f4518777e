package sqlstore

import (
	"strings"

	"github.com/palisade-auth/palisade/internal/store"
)

// maxPage bounds one list call whatever the caller asks.
const maxPage = 1000

func pageLimit(n int) int {
	if n <= 0 || n > maxPage {
		return maxPage
	}
	return n
}

// pageQuery is a list's statement: from ("SELECT ... FROM ...") kept to
// the conditions where, in order, and LIMIT a last parameter (pageLimit).
func pageQuery(from string, where []string, order string) string {
	if len(where) > 0 {
		from += " WHERE " + strings.Join(where, " AND ")
	}
	return from + " ORDER BY " + order + " LIMIT ?"
}

// afterCursor adds to a list's conditions "past c" in its (timeColumn, id)
// order, ascending or descending (desc); no condition when c is nil. Ties
// on the time are broken by id, so a page neither skips nor repeats an
// entry sharing its time with the cursor.
func afterCursor(where []string, args []any, timeColumn string, desc bool, c *store.PageCursor) ([]string, []any) {
	if c == nil {
		return where, args
	}
	op := ">"
	if desc {
		op = "<"
	}
	where = append(where, "("+timeColumn+" "+op+" ? OR ("+timeColumn+" = ? AND id "+op+" ?))")
	return where, append(args, ts(c.At), ts(c.At), c.ID)
}
