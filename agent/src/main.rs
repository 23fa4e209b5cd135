fn main() -> anyhow::Result<()> {
    let _e = cosched_agent::ebpf::load()?;
    println!("loaded");
    std::thread::sleep(std::time::Duration::from_secs(2));
    Ok(())
}
