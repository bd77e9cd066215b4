import LanchatCore

/// What a node is configured with: who it is, its limits and policies (the daemon sets them from its
/// flags, the simulator makes them small), and with what the shell gives it, its environment.
extension SessionStateMachine {
    /// What the node runs with, given once at its start: its configuration, and what the shell provides
    /// (the address book discovery keeps, the short code a person compares, the ids' generator).
    struct Environment: Sendable {
        let configuration: Configuration
        let addressBook: any PeerAddressBook
        let shortCode: @Sendable (PeerID) -> String
        /// Ids of messages, invitations, notices, transfers and streams (the only part that changes).
        var ids: IDGenerator
    }

    public struct Configuration: Sendable, Equatable {
        public var ownID: PeerID
        public var ownName: String
        /// Our peer port, told to other members so they can dial us.
        public var port: Int
        public var autoAccept: AutoAcceptPolicy
        /// Milliseconds an invitation waits when the inviter set no timeout.
        public var defaultInviteTimeout: Int64 = 60_000
        /// The longest invitation timeout we honour.
        public var maximumInviteTimeout: Int64 = 3_600_000
        /// Invitations waiting for an answer, at most (in all, and from one peer: one host cannot use up
        /// everyone's share).
        public var maximumPendingInvitations = 64
        public var maximumPendingInvitationsPerPeer = 4
        /// An unacknowledged reliable message is resent this often (milliseconds) while connected.
        public var retransmitInterval: Int64 = 5_000
        /// The longest wait between two dials of a member (milliseconds).
        public var maximumReconnectDelay: Int64 = 10_000
        /// The longest wait between two dials of a member we have never been connected with (milliseconds):
        /// a member can introduce members at addresses of its choosing, and have us dial them.
        public var maximumUnseenReconnectDelay: Int64 = 300_000
        /// Dials started per look at the redial schedule (every `redialCheckInterval`), and under way at
        /// once: the total dial rate and the descriptors it holds are bounded whatever members introduce.
        public var maximumDialsPerCheck = 4
        public var maximumDialsAtOnce = 16
        /// How often the redial schedule is looked at while a member is not connected (milliseconds).
        public var redialCheckInterval: Int64 = 250
        /// How long after we join (accept an invitation) our inviter's history offer is taken (milliseconds;
        /// lanchatd's `history-wait`): an inviter cannot hold the door open to send a history later, or two.
        /// Two minutes: an inviter exports a million messages in a few seconds, but exports go one at a
        /// time, and a few newcomers at once on a slow disk take longer.
        public var historyOfferTimeout: Int64 = 120_000
        /// How long a membership claim waits for a member to introduce its sender (milliseconds).
        public var claimLifetime: Int64 = 30_000
        /// Grace period after an invitation's own timeout before we give up on an answer (milliseconds).
        public var inviteReplyGrace: Int64 = 2_000
        /// How often each room's member list is sent again to its connected members (milliseconds), so
        /// that an introduction or a ROOM_LEAVE lost with a connection is made good.
        public var resyncInterval: Int64 = 30_000
        /// Invitations without an answer remembered (see `unanswered`).
        public var maximumUnansweredInvitations = 256
        /// Connections from peers that share no room with us (one about to invite us, a `lanchat ping`)
        /// kept at once; past it the oldest of them with no invitation under way is closed.
        public var maximumStrangerLinks = 64
        /// How long a member that left is not re-introduced by others (milliseconds); at most
        /// `maximumTombstones` are kept.
        public var tombstoneLifetime: Int64 = 60_000
        public var maximumTombstones = 1024
        /// Stream windows, chunk size and caps (the simulator makes them small).
        public var streamLimits = StreamTable.Limits()
        /// Transfer caps, windows and the largest file accepted.
        public var transferLimits = TransferLimits()
        /// Our encryption preference. With `none` no connection proves an id, so ids seen with a key
        /// are not protected (see `keyed`).
        public var encryption: EncryptionPreference = .required
        /// Membership claims kept (a ROOM_MEMBERS from a peer we do not count as a member yet): from one
        /// peer, and in all.
        public var maximumClaimsPerPeer = 8
        public var maximumClaims = 256
        /// Members of a room at most (besides us): introductions and admissions past it are not taken, so
        /// that one member's ROOM_MEMBERS cannot grow every outbox and member list without bound. (A room
        /// restored from an older store keeps what it had.)
        public var maximumRoomMembers = 255
        /// Members one member may introduce to us that we have not been connected with yet (at once; with
        /// keys): a room of 64 that one member invited fits; 255 keys of one member's making do not.
        public var maximumUnseenIntroductions = 64
        /// Ids remembered as seen with a key, at most (after that, new ones are not added).
        public var maximumKeyedPeers = 65_536
        /// Our signing key and the check of others' signatures (wire version 2); nil: version 1 only.
        public var envelopes: EnvelopeKeys?
        /// Milliseconds without a person's command after which we turn away (nil: never).
        public var autoAway: Int64?

        public init(ownID: PeerID, ownName: String, port: Int, autoAccept: AutoAcceptPolicy) {
            self.ownID = ownID
            self.ownName = ownName
            self.port = port
            self.autoAccept = autoAccept
        }
    }
}
