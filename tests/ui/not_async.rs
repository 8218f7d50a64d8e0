#[eddy::main]
fn main() {}
