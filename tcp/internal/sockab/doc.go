// Package sockab is the socket-layer A/B of issue 30: Go's netpoller, as
// tcp/ uses it, against io_uring, serving the same NVMe/TCP-like exchange
// over 127.0.0.1. It is a measurement, not part of the product: nothing
// outside this directory imports it.
//
// A host sends a 72-byte command capsule (the 8-byte common header and the
// 64-byte SQE), with 4 KiB of in-capsule data for a write; the server
// answers a read with a 24-byte C2HData header (LAST_PDU and SUCCESS) and
// 4 KiB of data, a write with a 24-byte response capsule. There is no
// ICReq, no digest and no R2T: the exchange is the steady state of 4 KiB
// I/O on a connection that is set up.
//
// Servers do that (Variants): "netpoller", a reader and a writer
// goroutine per connection handing requests over under a mutex, the writer
// sending a batch of headers and data in one writev, as tcp/conn.go and
// tcp/writer.go do; "uring", one goroutine locked to its thread that owns
// an io_uring ring and serves every connection with IORING_OP_RECV and
// IORING_OP_SENDMSG, submitting and reaping in batches; and, to tell what
// of a difference is the netpoller's and what the hand-off's,
// "netpoller-inline", one goroutine per connection that reads, executes
// and writes.
//
// The benchmarks (build tag sockab, so that make unit leaves them out) run
// the server in a child process, so that its CPU time is its own; `make
// sockab` runs them in alternating rounds and writes the summary.
package sockab
