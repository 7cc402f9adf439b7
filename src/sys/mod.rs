//! The only module with `unsafe` code: thin, documented wrappers over the system calls guard
//! needs that have no safe wrapper in `nix`.
#![allow(unsafe_code)]
