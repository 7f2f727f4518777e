package main

// eachPage reads a whole list a page at a time: fetch gets "" and then
// each page's next cursor until a page has none, and each is called on
// every item in order. fetch may ask for fewer items when the caller wants
// only some; it returns no next cursor to stop.
func eachPage[T any](fetch func(cursor string) (items []T, next string, err error), each func(T) error) error {
	cursor := ""
	for {
		items, next, err := fetch(cursor)
		if err != nil {
			return err
		}
		for _, x := range items {
			if err := each(x); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		cursor = next
	}
}
