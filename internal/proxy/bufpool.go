package proxy

import (
	"net/http/httputil"
	"sync"
)

// copyBufferSize is the size of the buffers bodies are copied through,
// the size ReverseProxy allocates on its own.
const copyBufferSize = 32 << 10

// bufferPool lends ReverseProxy its copy buffers: a fresh 32 KiB buffer
// per request was about a quarter of the proxy's CPU in allocation and
// garbage collection. It pools array pointers, so neither Get nor Put
// allocates once the pool is warm.
type bufferPool struct{ p sync.Pool }

var _ httputil.BufferPool = (*bufferPool)(nil)

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { return new([copyBufferSize]byte) }}}
}

func (b *bufferPool) Get() []byte { return b.p.Get().(*[copyBufferSize]byte)[:] }

func (b *bufferPool) Put(buf []byte) {
	// ReverseProxy returns what Get gave it; anything else is not ours.
	if len(buf) != copyBufferSize {
		return
	}
	b.p.Put((*[copyBufferSize]byte)(buf))
}
