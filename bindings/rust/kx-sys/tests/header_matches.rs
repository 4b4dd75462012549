//! Every function of kx.h is declared in kx-sys with the same parameter and return types, and
//! kx-sys declares nothing kx.h does not have.
use std::collections::BTreeMap;

const HEADER: &str = include_str!("../../../../capi/include/kx/kx.h");
const SYS: &str = include_str!("../src/lib.rs");

/// name -> (return type, parameter types), all as Rust spells them.
type Signatures = BTreeMap<String, (String, Vec<String>)>;

fn tokens(c: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for ch in c.chars() {
        if ch.is_alphanumeric() || ch == '_' {
            word.push(ch);
        } else {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            if ch == '*' {
                out.push("*".to_string());
            }
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

fn rust_base(c: &str) -> String {
    match c {
        "int32_t" => "i32",
        "int64_t" => "i64",
        "uint32_t" => "u32",
        "uint64_t" => "u64",
        "size_t" => "usize",
        "float" => "f32",
        "double" => "f64",
        "char" => "c_char",
        "void" => "c_void",
        other => other,
    }
    .to_string()
}

/// A C type (no name) as Rust writes it: "const char* const*" -> "*const *const c_char".
fn rust_type(t: &[String]) -> String {
    let mut i = 0;
    let mut pointee_const = false;
    if t[i] == "const" {
        pointee_const = true;
        i += 1;
    }
    let mut ty = rust_base(&t[i]);
    i += 1;
    while i < t.len() {
        if t[i] == "*" {
            ty = format!("*{} {}", if pointee_const { "const" } else { "mut" }, ty);
            pointee_const = false;
        } else if t[i] == "const" {
            pointee_const = true;
        }
        i += 1;
    }
    ty
}

/// The declaration without kx.h's attribute macros (KX_MUST_CHECK, KX_DEPRECATED("...")), which
/// change no signature.
fn without_attributes(decl: &str) -> String {
    let mut out = decl.replace("KX_MUST_CHECK", " ");
    // KX_DEPRECATED("...") holds a string that may hold parentheses: it ends at `")`.
    while let Some(at) = out.find("KX_DEPRECATED(") {
        let end = at + out[at..].find("\")").expect("KX_DEPRECATED(\"...\") is closed") + 2;
        out.replace_range(at..end, " ");
    }
    out
}

fn header_signatures() -> Signatures {
    let mut out = Signatures::new();
    let text: String = HEADER.lines().filter(|l| !l.trim_start().starts_with('#')).collect::<Vec<_>>().join(" ");
    for decl in text.split("KX_API").skip(1) {
        let decl = &decl[..decl.find(';').expect("declaration ends with ;")];
        let decl = without_attributes(decl);
        let decl = decl.as_str();
        let open = decl.find('(').unwrap();
        let close = decl.rfind(')').unwrap();
        let head = tokens(&decl[..open]);
        let name = head.last().unwrap().clone();
        let ret = if head.len() == 2 && head[0] == "void" { String::new() } else { rust_type(&head[..head.len() - 1]) };
        let mut params = Vec::new();
        for p in decl[open + 1..close].split(',') {
            let t = tokens(p);
            if t.is_empty() || (t.len() == 1 && t[0] == "void") {
                continue;
            }
            params.push(rust_type(&t[..t.len() - 1])); // the last token is the parameter's name
        }
        out.insert(name, (ret, params));
    }
    out
}

fn normalise(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn sys_signatures() -> Signatures {
    let mut out = Signatures::new();
    let block = &SYS[SYS.find("extern \"C\" {").unwrap()..];
    for decl in block.split("pub fn ").skip(1) {
        let decl = &decl[..decl.find(';').unwrap()];
        let open = decl.find('(').unwrap();
        let close = decl.rfind(')').unwrap();
        let name = decl[..open].trim().to_string();
        let params = decl[open + 1..close]
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| normalise(&p[p.find(':').unwrap() + 1..]))
            .collect();
        let ret = decl[close + 1..].trim().trim_start_matches("->").trim();
        out.insert(name, (normalise(ret), params));
    }
    out
}

#[test]
fn every_function_of_kx_h_is_declared_with_its_signature() {
    let header = header_signatures();
    let sys = sys_signatures();
    assert!(header.len() > 50, "parsed only {} declarations of kx.h", header.len());
    for (name, sig) in &header {
        let got = sys.get(name).unwrap_or_else(|| panic!("kx-sys does not declare {}", name));
        assert_eq!(got, sig, "{}: kx-sys declares {:?}, kx.h says {:?}", name, got, sig);
    }
    for name in sys.keys() {
        assert!(header.contains_key(name), "kx-sys declares {}, which kx.h does not have", name);
    }
}

#[test]
fn the_type_translation_is_right() {
    let t = |s: &str| rust_type(&tokens(s));
    assert_eq!(t("const char* const*"), "*const *const c_char");
    assert_eq!(t("kx_strategy**"), "*mut *mut kx_strategy");
    assert_eq!(t("const int64_t*"), "*const i64");
    assert_eq!(t("size_t"), "usize");
}
