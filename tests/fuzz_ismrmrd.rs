//! The seeded mutation fuzzer of fuzz_hdf5.rs for ISMRMRD files: the
//! single-coil, 3-coil and multi-slice multi-contrast fixtures, mutated
//! byte by byte (most mutations aimed at the XML header and the
//! acquisitions' headers and heap), each read through `recon inspect`
//! (tests/common/inspect.rs): accepted or refused with an error, never a
//! panic, a signal or a hang.

use crate::common;

use common::{inspect, mutate_bytes, repo, run_hdf5_cases, Outcome, Rng, HDF5_CASES};

#[test]
fn fuzz_multicoil_ismrmrd_files() {
    // The 3-coil fixture: channels and noise acquisitions in the heap.
    let tmp = tempfile::tempdir().unwrap();
    let fixture = repo().join("tests/fixtures/test-small-3coils.ismrmrd.h5");
    assert_eq!(
        inspect(&fixture, "the 3-coil ISMRMRD fixture"),
        Outcome::Accepted
    );
    let bytes = std::fs::read(&fixture).unwrap();
    let mut rng = Rng::new(2028);
    let cases = (0..HDF5_CASES / 2)
        .map(|i| {
            let focus = Some(bytes.len() / 4..bytes.len());
            let (b, what) = mutate_bytes(&bytes, &mut rng, focus);
            let p = tmp.path().join(format!("c{i}.h5"));
            std::fs::write(&p, b).unwrap();
            (p, format!("case {i}: {what}"))
        })
        .collect();
    run_hdf5_cases("3-coil ISMRMRD files", cases);
}

#[test]
fn fuzz_ismrmrd_files() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = repo().join("tests/fixtures/test-small.ismrmrd.h5");
    assert_eq!(inspect(&fixture, "the ISMRMRD fixture"), Outcome::Accepted);
    let bytes = std::fs::read(&fixture).unwrap();
    // Aim most mutations at the XML header (matrix, FOV) and the
    // acquisitions' heap at the end of the file.
    let xml = bytes
        .windows(14)
        .position(|w| w == b"<ismrmrdHeader")
        .expect("the fixture holds its XML header");
    let mut rng = Rng::new(2027);
    let mut cases = Vec::new();
    for i in 0..HDF5_CASES {
        let focus = if i % 2 == 0 {
            xml..(xml + 2048).min(bytes.len())
        } else {
            bytes.len() / 2..bytes.len()
        };
        let (b, what) = mutate_bytes(&bytes, &mut rng, Some(focus));
        let p = tmp.path().join(format!("m{i}.h5"));
        std::fs::write(&p, b).unwrap();
        cases.push((p, format!("case {i}: {what}")));
    }
    // Matrix sizes in the XML: digits replaced, so the header stays XML.
    let digits: Vec<usize> = (xml..(xml + 4096).min(bytes.len()))
        .filter(|&i| bytes[i].is_ascii_digit())
        .collect();
    for (j, v) in [b'0', b'9', b'-', b'.', b'e', b' '].iter().enumerate() {
        for k in 0..6 {
            let mut b = bytes.clone();
            let at = digits[(j * 7 + k * 13) % digits.len()];
            b[at] = *v;
            let p = tmp.path().join(format!("xml{j}-{k}.h5"));
            std::fs::write(&p, b).unwrap();
            cases.push((p, format!("XML byte {at} set to {:?}", *v as char)));
        }
    }
    run_hdf5_cases("ISMRMRD files", cases);
}

#[test]
fn fuzz_multislice_ismrmrd_files() {
    // The multi-slice, multi-contrast fixture with geometry: mutations
    // aimed at its acquisitions' headers (idx, position, directions) and
    // their heap.
    let tmp = tempfile::tempdir().unwrap();
    let fixture = repo().join("tests/fixtures/multislice-2contrasts.ismrmrd.h5");
    assert_eq!(
        inspect(&fixture, "the multi-slice ISMRMRD fixture"),
        Outcome::Accepted
    );
    let bytes = std::fs::read(&fixture).unwrap();
    let mut rng = Rng::new(2029);
    let cases = (0..HDF5_CASES / 2)
        .map(|i| {
            let focus = Some(bytes.len() / 8..bytes.len());
            let (b, what) = mutate_bytes(&bytes, &mut rng, focus);
            let p = tmp.path().join(format!("s{i}.h5"));
            std::fs::write(&p, b).unwrap();
            (p, format!("case {i}: {what}"))
        })
        .collect();
    run_hdf5_cases("multi-slice ISMRMRD files", cases);
}
