#[eddy::test(workers = "four")]
async fn t() {}

#[eddy::test(workers = 0)]
async fn u() {}

fn main() {}
