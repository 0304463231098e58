//! AF_PACKET fanout groups.
