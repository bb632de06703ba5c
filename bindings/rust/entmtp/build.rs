//! Records the EntMTP library directory (found by entmtp-sys through
//! pkg-config) as the run path of this crate's tests, so that
//! `cargo test` finds libentmtp.so.N without LD_LIBRARY_PATH. Set
//! ENTMTP_NO_RPATH=1 to leave it out.
fn main() {
    println!("cargo:rerun-if-env-changed=ENTMTP_NO_RPATH");
    if std::env::var("ENTMTP_NO_RPATH").map(|v| v == "1").unwrap_or(false) {
        return;
    }
    if let Ok(dir) = std::env::var("DEP_ENTMTP_LIBDIR") {
        println!("cargo:rustc-link-arg-tests=-Wl,-rpath,{dir}");
    }
}
