//! The read stage: every pointer argument of a decoded [`Call`] copied from the caller's memory
//! in one go, before anything is resolved. One process_vm_readv carries an iovec per argument:
//! a string's first piece runs to the end of its page (where the kernel's own string copy
//! could fault too) or for [`FIRST_STR`] bytes if that is less, a structure is read whole, an
//! argv's first page of pointers comes along. What that one copy could not finish (a string
//! crossing a page or longer than that, an exec's argument strings) is read next, batched
//! again where it can be.
//!
//! Results are the ones the per-argument readers in [`super::memory`] give, errors included:
//! a failed piece is re-read on its own for its exact error. The caller still has to check
//! the notification id before trusting any of it (see `handle`).

use std::io;

use super::decode::{ArgvPtr, BlockPtr, Call, StrPtr, Want};
use super::memory::{self, PATH_MAX};

/// An exec's argv: at most this many arguments...
const ARGV_MAX_ARGS: usize = 16 * 1024;
/// How much of a path the first copy takes (less where its page ends first): nearly every
/// path is shorter, and the rest of a longer one is read on its own. A buffer this size comes
/// from the allocator's per-thread cache; one up to the end of the page (up to 4 KiB, on
/// average 2) made every call take a large chunk, zeroed, which made `malloc` consolidate its
/// free lists each time.
const FIRST_STR: usize = 512;
/// ...and this many bytes of strings (the kernel's own limit depends on the stack rlimit).
const ARGV_MAX_TOTAL: usize = 2 * 1024 * 1024;

/// What one argument's read gave.
#[derive(Debug)]
enum Got {
    Bytes(io::Result<Vec<u8>>),
    Argv(io::Result<Vec<Vec<u8>>>),
}

/// The caller's memory that one call points to, as the read stage found it.
#[derive(Debug)]
pub struct Memory {
    items: Vec<(Want, Option<Got>)>,
}

impl Memory {
    /// Take what `want` read (each read is handed out once; a call naming the same pointer
    /// twice had it read twice).
    fn take(&mut self, want: Want) -> Option<Got> {
        self.items
            .iter_mut()
            .find(|(w, got)| *w == want && got.is_some())
            .and_then(|(_, got)| got.take())
    }

    /// The string at `p`. Reading a pointer the read stage was not asked for is a bug: EFAULT.
    pub fn string(&mut self, p: StrPtr) -> io::Result<Vec<u8>> {
        match self.take(Want::Str(p)) {
            Some(Got::Bytes(r)) => r,
            _ => Err(unread()),
        }
    }

    /// The structure at `p`.
    pub fn block(&mut self, p: BlockPtr) -> io::Result<Vec<u8>> {
        match self.take(Want::Block(p)) {
            Some(Got::Bytes(r)) => r,
            _ => Err(unread()),
        }
    }

    /// The argument strings of the argv at `p`.
    pub fn argv(&mut self, p: ArgvPtr) -> io::Result<Vec<Vec<u8>>> {
        match self.take(Want::Argv(p)) {
            Some(Got::Argv(r)) => r,
            _ => Err(unread()),
        }
    }
}

fn unread() -> io::Error {
    debug_assert!(false, "an argument the read stage did not read");
    io::Error::from_raw_os_error(libc::EFAULT)
}

/// The piece of `want` the first copy takes: `None` for a NULL pointer (nothing to read).
fn first_piece(want: Want) -> Option<(u64, usize)> {
    match want {
        Want::Str(StrPtr(addr)) => {
            (addr != 0).then(|| (addr, memory::first_chunk(addr, FIRST_STR)))
        }
        Want::Block(b) => (b.addr != 0).then_some((b.addr, b.len)),
        Want::Argv(ArgvPtr(addr)) => {
            (addr != 0).then(|| (addr, memory::first_chunk(addr, ARGV_MAX_ARGS * 8)))
        }
    }
}

/// Read every pointer argument of `call` from process `pid`.
pub fn read(pid: u32, call: &Call) -> Memory {
    let wants: Vec<Want> = call.wants().into_iter().flatten().collect();
    let pieces: Vec<(u64, usize)> = wants.iter().filter_map(|&w| first_piece(w)).collect();
    let mut chunks = memory::read_chunks(pid, &pieces).into_iter();
    let items = wants
        .into_iter()
        .map(|want| {
            let chunk = if first_piece(want).is_some() {
                chunks.next().flatten()
            } else {
                None
            };
            let got = match want {
                Want::Str(StrPtr(addr)) => Got::Bytes(match chunk {
                    Some(c) => memory::finish_cstr(pid, addr, c, PATH_MAX),
                    None => memory::read_cstr(pid, addr, PATH_MAX),
                }),
                Want::Block(b) => Got::Bytes(match chunk {
                    Some(c) => Ok(c),
                    None => memory::read_bytes(pid, b.addr, b.len),
                }),
                Want::Argv(ArgvPtr(addr)) => Got::Argv(memory::read_argv_from(
                    pid,
                    addr,
                    chunk,
                    ARGV_MAX_ARGS,
                    ARGV_MAX_TOTAL,
                )),
            };
            (want, Some(got))
        })
        .collect();
    Memory { items }
}

#[cfg(test)]
mod tests {
    use super::super::decode::{Args, OpenHow, PathArg};
    use super::*;

    fn me() -> u32 {
        std::process::id()
    }

    fn at(p: &[u8]) -> PathArg {
        at_ptr(StrPtr(p.as_ptr() as u64))
    }

    /// A path at `p` relative to the cwd.
    fn at_ptr(p: StrPtr) -> PathArg {
        PathArg {
            dirfd: libc::AT_FDCWD as u64,
            path: Some(p),
            empty_path: false,
        }
    }

    /// unlinkat of the path at `p`.
    fn unlink(p: StrPtr) -> Call {
        Call {
            syscall: "unlinkat",
            args: Args::Unlink {
                at: at_ptr(p),
                rmdir: false,
            },
        }
    }

    #[test]
    fn every_argument_is_read_as_the_single_readers_read_it() {
        let (from, to) = (b"old name\0".to_vec(), b"new name\0".to_vec());
        let call = Call {
            syscall: "renameat2",
            args: Args::Rename {
                from: at(&from),
                to: at(&to),
                flags: 0,
            },
        };
        let mut m = read(me(), &call);
        let Args::Rename { from: f, to: t, .. } = call.args else {
            unreachable!()
        };
        assert_eq!(m.string(f.path.unwrap()).unwrap(), b"old name");
        assert_eq!(m.string(t.path.unwrap()).unwrap(), b"new name");

        let how = [1u64, 2, 3];
        let path = b"f\0";
        let block = BlockPtr {
            addr: how.as_ptr() as u64,
            len: 24,
        };
        let call = Call {
            syscall: "openat2",
            args: Args::Open {
                at: at(path),
                how: OpenHow::InMemory(block),
            },
        };
        let mut m = read(me(), &call);
        assert_eq!(m.string(StrPtr(path.as_ptr() as u64)).unwrap(), b"f");
        let got = m.block(block).unwrap();
        assert_eq!(got.len(), 24);
        assert_eq!(got[8..16], 2u64.to_ne_bytes());
    }

    #[test]
    fn the_same_pointer_twice_is_read_twice() {
        let name = b"same\0".to_vec();
        let call = Call {
            syscall: "renameat2",
            args: Args::Rename {
                from: at(&name),
                to: at(&name),
                flags: 0,
            },
        };
        let mut m = read(me(), &call);
        let p = StrPtr(name.as_ptr() as u64);
        assert_eq!(m.string(p).unwrap(), b"same");
        assert_eq!(m.string(p).unwrap(), b"same");
    }

    #[test]
    fn bad_pointers_fail_each_with_its_own_error() {
        let good = b"fine\0".to_vec();
        let call = Call {
            syscall: "renameat2",
            args: Args::Rename {
                from: at_ptr(StrPtr(8)),
                to: at(&good),
                flags: 0,
            },
        };
        let mut m = read(me(), &call);
        let err = m.string(StrPtr(8)).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EFAULT));
        assert_eq!(m.string(StrPtr(good.as_ptr() as u64)).unwrap(), b"fine");
        let err = read(me(), &unlink(StrPtr(0)))
            .string(StrPtr(0))
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EFAULT));
    }

    #[test]
    fn strings_crossing_pages_and_long_strings_match_the_single_reader() {
        // A buffer of three pages; strings placed so they cross the page boundaries.
        let mut buf = vec![b'x'; 3 * 4096];
        let base = buf.as_ptr() as usize;
        let page2 = (base / 4096 + 1) * 4096 - base;
        let page2 = if page2 < 16 { page2 + 4096 } else { page2 };
        buf[page2 + 10] = 0; // crosses into the second page
        let start = page2 - 5;
        let short_len = PATH_MAX + 100; // no NUL within PATH_MAX
        buf[page2 + 4096 + 200] = 0;
        let long_start = page2 + 4096 + 200 - short_len;
        for (off, ok) in [(start, true), (long_start, false)] {
            let p = StrPtr((base + off) as u64);
            let got = read(me(), &unlink(p)).string(p);
            let want = memory::read_cstr(me(), p.0, PATH_MAX);
            match (got, want) {
                (Ok(a), Ok(b)) => {
                    assert!(ok);
                    assert_eq!(a, b);
                    assert_eq!(a.len(), 15);
                }
                (Err(a), Err(b)) => {
                    assert!(!ok);
                    assert_eq!(a.raw_os_error(), b.raw_os_error());
                    assert_eq!(a.raw_os_error(), Some(libc::ENAMETOOLONG));
                }
                (a, b) => panic!("{a:?} vs {b:?}"),
            }
        }
    }

    /// Strings around and past the first piece's size, starting at a page's start (the
    /// whole page would fit in one piece) and just before a page's end, are read whole: the
    /// rest of a long one comes in a second round.
    #[test]
    fn strings_longer_than_the_first_piece_are_read_whole() {
        for len in [
            1,
            FIRST_STR - 1,
            FIRST_STR,
            FIRST_STR + 1,
            1500,
            PATH_MAX - 1,
        ] {
            for end_of_page in [false, true] {
                let mut b = vec![b'y'; 4 * 4096];
                let base = b.as_ptr() as usize;
                let page = (base / 4096 + 1) * 4096 - base;
                let off = if end_of_page { page + 4096 - 3 } else { page };
                let at = base + off;
                assert_eq!(at % 4096, if end_of_page { 4093 } else { 0 });
                b[off + len] = 0;
                let p = StrPtr(at as u64);
                let got = read(me(), &unlink(p)).string(p).expect("read");
                assert_eq!(got.len(), len, "length {len} at offset {off}");
                assert!(got.iter().all(|&c| c == b'y'));
                assert_eq!(
                    Ok(got),
                    memory::read_cstr(me(), p.0, PATH_MAX).map_err(|e| e.kind())
                );
            }
        }
    }

    #[test]
    fn argv_is_read_as_the_single_reader_reads_it() {
        let strings: Vec<Vec<u8>> = (0..600)
            .map(|i| {
                let mut s = format!("arg-{i}-").into_bytes();
                s.extend(std::iter::repeat_n(b'a', i % 300));
                s.push(0);
                s
            })
            .collect();
        let mut ptrs: Vec<u64> = strings.iter().map(|s| s.as_ptr() as u64).collect();
        ptrs.push(0);
        let argv = ArgvPtr(ptrs.as_ptr() as u64);
        let call = Call {
            syscall: "execve",
            args: Args::Exec {
                at: at(b"/bin/true\0"),
                argv,
                envp: ArgvPtr(0),
                empty_path: false,
            },
        };
        let got = read(me(), &call).argv(argv).unwrap();
        let want = memory::read_argv(me(), argv.0, ARGV_MAX_ARGS, ARGV_MAX_TOTAL).unwrap();
        assert_eq!(got.len(), 600);
        assert_eq!(got, want);
        // Too many arguments for the limit, and a bad pointer among them: the same error.
        assert_eq!(
            memory::read_argv_from(me(), argv.0, None, 100, ARGV_MAX_TOTAL)
                .unwrap_err()
                .raw_os_error(),
            Some(libc::E2BIG)
        );
        ptrs[3] = 8;
        let got = memory::read_argv_from(me(), argv.0, None, ARGV_MAX_ARGS, ARGV_MAX_TOTAL);
        let want = memory::read_argv(me(), argv.0, ARGV_MAX_ARGS, ARGV_MAX_TOTAL);
        assert_eq!(
            got.unwrap_err().raw_os_error(),
            want.unwrap_err().raw_os_error()
        );
        // Too many bytes in total.
        ptrs[3] = strings[3].as_ptr() as u64;
        let got = memory::read_argv_from(me(), argv.0, None, ARGV_MAX_ARGS, 10_000);
        assert_eq!(got.unwrap_err().raw_os_error(), Some(libc::E2BIG));
        assert_eq!(
            memory::read_argv_from(me(), 0, None, ARGV_MAX_ARGS, ARGV_MAX_TOTAL).unwrap(),
            Vec::<Vec<u8>>::new()
        );
    }
}
