// A block that needs nothing: it runs as it is, and its own assertions hold.

#[test]
fn runs() {
    /* the block */
}
