// Package uring is a narrow Go API over Linux io_uring (io_uring_setup(2),
// io_uring_enter(2), io_uring_register(2)): a ring that one goroutine owns,
// on which it prepares reads, writes and fsyncs of file descriptors and
// collects their results, each tagged with the caller's 64-bit value.
//
// It holds the ring's unsafe code: the mmap'd submission and completion
// queues, and buffer addresses put in SQEs. What an operation means (its
// slot, a short transfer continued, the device it belongs to) stays in
// blockdev, which is the only importer.
package uring
