#[eddy::test]
fn t() {}

fn main() {}
