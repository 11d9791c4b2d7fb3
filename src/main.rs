//! `git-lease`: the `git lease` subcommand. All the rules live in the library.
//!
//! The process starts at a plain C `main` rather than through std's runtime start-up: a claim
//! is one short process, and std's start-up reads `/proc/self/maps` to find the main
//! thread's stack and sets up a guard and an alternate signal stack for stack-overflow
//! reports, about 0.1 ms per process (`perf stat`, a `println!` program: 0.92 ms with std's
//! start-up, 0.82 ms without). The two things it does that matter here are done below; a
//! stack overflow now ends in a plain SIGSEGV instead of a message. The arguments are taken
//! from `main`'s own `argv`, which every C runtime passes (std's `env::args` gets them without
//! its start-up only on glibc).

// Under `cargo test` the test harness provides `main`.
#![cfg_attr(not(test), no_main)]

mod cli;

/// The process entry (under `cargo test`, only a function the harness's `main` leaves alone).
#[cfg_attr(not(test), no_mangle)]
#[cfg_attr(test, allow(dead_code))]
pub extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    reopen_closed_standard_descriptors();
    ignore_sigpipe();
    // Release builds abort on a panic; elsewhere a panic must not unwind into the C runtime:
    // it ends the process with Rust's usual exit code for it, 101.
    let code = std::panic::catch_unwind(|| cli::main(arguments(argc, argv))).unwrap_or(101);
    // std's exit flushes stdout, as returning from std's main would.
    std::process::exit(i32::from(code))
}

/// The C runtime's `argc` and `argv` as OS strings.
fn arguments(argc: libc::c_int, argv: *const *const libc::c_char) -> Vec<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    let count = usize::try_from(argc).unwrap_or(0);
    (0..count)
        .map(|i| {
            // SAFETY: the C runtime passes `argc` valid pointers to NUL-terminated strings in
            // `argv`, alive for the whole process.
            let arg = unsafe { std::ffi::CStr::from_ptr(*argv.add(i)) };
            std::ffi::OsStr::from_bytes(arg.to_bytes()).to_owned()
        })
        .collect()
}

/// Opens `/dev/null` on each of descriptors 0, 1 and 2 that is closed, as std and git do at
/// start-up, so that no file this process opens (a ref lock, an object) can take the place of
/// its standard output and receive what it prints.
fn reopen_closed_standard_descriptors() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: poll(2) reads and writes only the array passed with its length.
    if unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) } == -1 {
        return;
    }
    for fd in fds {
        if fd.revents & libc::POLLNVAL != 0 {
            // SAFETY: open(2) with a static NUL-terminated path; the lowest free descriptor,
            // which is this closed one, is taken. Failure leaves it closed, as before.
            unsafe {
                libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
            }
        }
    }
}

/// Ignores SIGPIPE, as std's start-up does: output to a closed pipe becomes an error that the
/// command handles (`git lease list | head` exits 0), not a silent death.
fn ignore_sigpipe() {
    // SAFETY: setting a signal disposition to SIG_IGN installs no handler code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}
