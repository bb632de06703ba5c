//! Finds the installed EntMTP C library through pkg-config, with the standard
//! library only (no crates): `pkg-config --libs-only-L` and `--libs-only-l`.
//!
//! Environment:
//!   PKG_CONFIG_PATH    where entmtp.pc is (PREFIX/lib/pkgconfig)
//!   PKG_CONFIG         the pkg-config program (default "pkg-config")
//!   ENTMTP_LIB_DIR     skip pkg-config: link -lentmtp from this directory
//!   ENTMTP_STATIC=1    link libentmtp.a and its private dependencies (pkg-config --static)
//!
//! The library directory is exported to dependent build scripts as
//! DEP_ENTMTP_LIBDIR (the `entmtp` crate uses it to set a run path for its
//! tests and examples).
use std::env;
use std::process::Command;

fn pkg_config(args: &[&str]) -> Result<String, String> {
    let prog = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = Command::new(&prog)
        .args(args)
        .arg("entmtp")
        .output()
        .map_err(|e| format!("cannot run {prog}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{prog} {} entmtp` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    for v in ["PKG_CONFIG_PATH", "PKG_CONFIG", "ENTMTP_LIB_DIR", "ENTMTP_STATIC"] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    println!("cargo:rerun-if-changed=build.rs");

    if let Ok(dir) = env::var("ENTMTP_LIB_DIR") {
        println!("cargo:rustc-link-search=native={dir}");
        println!("cargo:rustc-link-lib=dylib=entmtp");
        println!("cargo:libdir={dir}");
        return;
    }
    let static_link = env::var("ENTMTP_STATIC").map(|v| v == "1").unwrap_or(false);
    let mut extra: Vec<&str> = Vec::new();
    if static_link {
        extra.push("--static");
    }
    let run = |what: &str| -> String {
        let mut a = extra.clone();
        a.push(what);
        match pkg_config(&a) {
            Ok(s) => s,
            Err(e) => panic!(
                "entmtp-sys: {e}\nInstall the EntMTP C library (cmake --install BUILD --prefix P) and \
                 set PKG_CONFIG_PATH=P/lib/pkgconfig, or set ENTMTP_LIB_DIR to the directory of libentmtp.so."
            ),
        }
    };
    let mut first_dir = None;
    for flag in run("--libs-only-L").split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
            first_dir.get_or_insert_with(|| dir.to_string());
        }
    }
    for flag in run("--libs-only-l").split_whitespace() {
        if let Some(lib) = flag.strip_prefix("-l") {
            if lib == "entmtp" && static_link {
                println!("cargo:rustc-link-lib=static=entmtp");
            } else {
                println!("cargo:rustc-link-lib={lib}");
            }
        }
    }
    if let Some(dir) = first_dir {
        println!("cargo:libdir={dir}");
    }
}
