//! Sends one line to a Unix socket and prints the reply line: a raw
//! request, as a test sends it as another user (`setpriv ... line-call
//! SOCKET LINE`), where the test's own client cannot run.
use std::{
    io::{BufRead as _, BufReader, Write as _},
    os::unix::net::UnixStream,
};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(path), Some(line)) = (args.next(), args.next()) else {
        eprintln!("usage: line-call SOCKET LINE");
        std::process::exit(2);
    };
    let mut stream = UnixStream::connect(&path).unwrap_or_else(|e| {
        eprintln!("line-call: connecting to {path}: {e}");
        std::process::exit(1);
    });
    stream.write_all(format!("{line}\n").as_bytes()).unwrap();
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply).unwrap();
    print!("{reply}");
}
