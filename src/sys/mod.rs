//! The only module with `unsafe` code: thin, documented wrappers over the system calls guard
//! needs that have no safe wrapper in `nix`. One system call per `unsafe` block, each turned at
//! once into `io::Result` or an `OwnedFd`, each with a `// SAFETY:` comment.
#![allow(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod alloc;
pub mod creds;
pub mod fs;
pub mod mapped;
pub mod meta;
pub mod net;
pub mod notify;
pub mod process;
pub mod stream;

pub use notify::{Listener, Notif, NotifSizes};
