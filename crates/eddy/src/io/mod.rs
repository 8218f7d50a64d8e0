//! Asynchronous IO on file descriptors: [`Async`], and asyncio's `add_reader` family.
//!
//! [`Async<T>`] wraps any fd-based type (a socket, a pipe, an eventfd, ...) and registers it
//! with the reactor of the worker that first uses it; [`Async::read_with`] and
//! [`Async::write_with`] retry a non-blocking operation each time the fd becomes ready. The
//! `net` module's types are built on it.
//!
//! [`add_reader`] and friends are asyncio's persistent fd callbacks.

mod async_fd;
mod watch;

pub(crate) use async_fd::is_nonblocking;
pub use async_fd::Async;
pub use watch::{add_reader, add_writer, remove_reader, remove_writer};
