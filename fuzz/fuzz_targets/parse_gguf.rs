//! Untrusted bytes through the whole inspect path: `Gguf::parse`, the prefix parser the page and
//! the CLI use, and the report built from a successful parse. Besides "never panics", it checks
//! that the two parsers agree: they read the same bytes in the same order, so a prefix may only
//! stop earlier (`NeedMore`), never decide differently.

#![no_main]

use inferno::gguf::{self, Gguf, GgufHeader, HeaderParse};
use inferno::inspect::Report;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let file_size = data.len() as u64;
    let full = Gguf::parse(data);

    // The first byte picks how much of the file the prefix parser sees (0 ..= all of it).
    let k = data.first().map_or(0, |&b| data.len() * usize::from(b) / 255);
    match (gguf::parse_header(&data[..k], file_size), &full) {
        (Ok(HeaderParse::Complete(header)), Ok(whole)) => {
            assert_eq!(fingerprint(&header), fingerprint(&whole.header));
        }
        (Ok(HeaderParse::Complete(_)), Err(e)) => panic!("prefix of {k} bytes parsed, whole file: {e}"),
        (Ok(HeaderParse::NeedMore { at_least }), _) => {
            assert!(
                at_least > k as u64 && at_least <= file_size,
                "NeedMore {at_least} for {k} of {file_size}"
            );
        }
        (Err(e), Err(whole)) => assert_eq!(&e, whole),
        (Err(e), Ok(_)) => panic!("prefix of {k} bytes failed ({e}) but the whole file parsed"),
    }

    if let Ok(gguf) = full {
        let header = &gguf.header;
        assert!(header.alignment.is_power_of_two() && header.data_offset % header.alignment == 0);
        for t in &header.tensors {
            let end = header.data_offset + t.offset + t.n_bytes;
            assert!(end <= file_size, "tensor {:?} ends at {end} of {file_size}", t.name);
            assert_eq!(gguf.tensor_data(t).len() as u64, t.n_bytes);
        }
        let report = Report::new(header);
        let json = serde_json::to_string(&report).expect("report serializes");
        assert!(!json.is_empty());
    }
});

/// Everything in a header, compared by its debug text: a NaN metadata value is not `==` itself.
fn fingerprint(h: &GgufHeader) -> String {
    let metadata: Vec<_> = h.metadata.iter().collect();
    format!("{} {} {} {} {metadata:?} {:?}", h.version, h.alignment, h.data_offset, h.file_size, h.tensors)
}
