//! Sizes of ZooKeeper requests as the wire encodes them (jute), so that no
//! write is sent that the server would refuse by closing the connection.
//!
//! The server reads each request's 4-byte length first and closes the
//! connection when it exceeds `jute.maxbuffer` (1,048,575 bytes, `0xfffff`,
//! unless the server is started with `-Djute.maxbuffer`):
//! `zookeeper-server/src/main/java/org/apache/zookeeper/server/NIOServerCnxn.java`,
//! `readLength` ("Len error … length is greater than jute.maxbuffer"), and
//! the `jute.maxbuffer` entry of ZooKeeper's administrator's guide
//! (`zookeeperAdmin.md`, "Unsafe Options"). The client then sees a lost
//! connection, not an error code, and a retry would fail the same way. A
//! 100,000-task deployment must not need that flag, so every write is
//! sized here first and one that would not fit is refused with
//! [`CoordinationError::TooLarge`](crate::coordination::CoordinationError::TooLarge).
//!
//! The encoding (`zookeeper-jute/src/main/resources/zookeeper.jute`):
//! a `multi` is a `RequestHeader` (`xid`, `type`: 8 bytes), then per
//! operation a `MultiHeader` (`type` int, `done` boolean, `err` int: 9
//! bytes) and its request record, then a closing `MultiHeader`. Strings and
//! buffers are a 4-byte length and their bytes; a vector is a 4-byte count
//! and its items. `CreateRequest` is path, data, ACL vector (each ACL:
//! `perms` int, `Id` of `scheme` and `id` strings), `flags` int;
//! `SetDataRequest` path, data, version; `DeleteRequest` and
//! `CheckVersionRequest` path, version.

use zookeeper_client as zk;

/// The largest request ZooKeeper accepts without a `jute.maxbuffer` flag,
/// in bytes, not counting the 4-byte length that precedes it on the wire
/// (`NIOServerCnxn.readLength` compares that length with it).
pub const MAX_REQUEST: usize = 0xfffff;

/// `RequestHeader`: `xid` and `type`.
const REQUEST_HEADER: usize = 8;
/// `MultiHeader`: `type`, `done`, `err`.
const MULTI_HEADER: usize = 9;
/// A jute int (length prefixes, versions, flags, permissions).
const INT: usize = 4;

fn string(s: &[u8]) -> usize {
    INT + s.len()
}

/// One `check` operation of a `multi` (with its `MultiHeader`).
pub fn check(path: &str) -> usize {
    MULTI_HEADER + string(path.as_bytes()) + INT
}

/// One `create` operation of a `multi` without TTL (with its header).
pub fn create(path: &str, data: &[u8], acls: &zk::Acls<'_>) -> usize {
    let acls: usize = INT
        + acls
            .iter()
            .map(|acl| INT + string(acl.scheme().as_bytes()) + string(acl.id().as_bytes()))
            .sum::<usize>();
    MULTI_HEADER + string(path.as_bytes()) + string(data) + acls + INT
}

/// One `setData` operation of a `multi` (with its header).
pub fn set_data(path: &str, data: &[u8]) -> usize {
    MULTI_HEADER + string(path.as_bytes()) + string(data) + INT
}

/// One `delete` operation of a `multi` (with its header).
pub fn delete(path: &str) -> usize {
    MULTI_HEADER + string(path.as_bytes()) + INT
}

/// A whole `multi` request whose operations (each sized by the functions
/// above) take `operations` bytes.
pub fn multi(operations: usize) -> usize {
    REQUEST_HEADER + operations + MULTI_HEADER
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_counts_path_data_and_every_acl() {
        let open = zk::Acls::anyone_all();
        // header 9 + path 4+3 + data 4+2 + ACLs 4 + (4 + 4+5 + 4+6) + flags 4
        assert_eq!(create("/ab", b"{}", &open), 9 + 7 + 6 + (4 + 23) + 4);
        assert_eq!(set_data("/ab", b"{}"), 9 + 7 + 6 + 4);
        assert_eq!(delete("/ab"), 9 + 7 + 4);
        assert_eq!(check("/ab"), 9 + 7 + 4);
        assert_eq!(multi(0), 17);
    }
}
