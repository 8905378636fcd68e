//! Where stored responses are kept: memory, disk, and the misses on their way.

pub(crate) mod collapse;
pub(crate) mod disk;
pub(crate) mod disk_writer;
pub(crate) mod generations;
pub(crate) mod memory;
