/// A control request's method with its parameters, typed and checked: the one place that knows each
/// method's parameters on the wire (names, which are required, numbers and their ranges, flags). The
/// daemon decodes a request into a `ControlCall` once and answers it with one switch; clients build one
/// and send `request(id:)`. What needs the daemon's state (does the room or peer exist, is a name valid
/// as a room or stream name) is checked where the daemon acts on it. On the wire parameters stay a JSON object of strings (docs/control-api.md), so
/// clients in other languages keep working.
public enum ControlCall: Equatable, Sendable {
    case status
    case peers
    case watch
    case ping(peer: String, count: Int)
    case invite(Invite)
    case invitations
    case accept(id: String, history: JoinHistory = .all)
    case decline(id: String, reason: String?)
    case rooms
    case members(room: String?)
    case leave(room: String)
    case send(Send)
    case history(room: String?, limit: Int)
    /// `history` with `grep`, `from` or `since_ms`: the last `limit` messages that match.
    case search(Search)
    case forget(peer: String)
    case trust(peer: String)
    case sendFile(peer: String, path: String, fileToken: String?)
    case transfers
    case cancel(id: String)
    case stream(peer: String, name: String)
    /// `from`: only a stream this peer opens (name, instance or id prefix); nil: any member's.
    case streamAccept(name: String, from: String?)
    case connect(address: String, confirm: String?)
    case disconnect(peer: String)
    /// Sets this host's availability (`available`, `away`, `busy`) and text; both nil: only reads it.
    case presence(availability: String?, text: String?)
    /// Raises or lowers this host's hand in a room (nil: the only room).
    case hand(up: Bool, room: String?)
    /// A room's metadata: list, get, set or delete a key.
    case meta(Meta)
    /// The person is typing in a room (nil: the only room).
    case typing(room: String?)
    /// Publishes one line of text on a topic of a room, to its subscribers.
    case topicPublish(TopicPublish)
    /// Subscribes to a topic of a room (nil: the only room): `topic` events follow the answer.
    case topicSubscribe(room: String?, topic: String)
    /// Administration: remove a member of a room (name or id prefix) with a reason; close a room; name
    /// (`on`) or un-name an administrator.
    case remove(peer: String, room: String?, reason: String?)
    case close(room: String, reason: String?)
    case admin(peer: String, room: String?, on: Bool)
    /// Files shared in rooms: share one (the daemon keeps a copy and announces it), list them, fetch a
    /// copy (into `to`, a directory; nil: the download directory).
    case share(room: String, path: String, fileToken: String?)
    case files(room: String?, limit: Int)
    case fetch(id: String, to: String?)

    public struct TopicPublish: Equatable, Sendable {
        public var room: String?
        public var topic: String
        public var text: String
        /// Written even when a subscriber's connection is full (the default drops it for that one).
        public var reliable: Bool

        public init(room: String? = nil, topic: String, text: String, reliable: Bool = false) {
            self.room = room
            self.topic = topic
            self.text = text
            self.reliable = reliable
        }
    }

    public struct Meta: Equatable, Sendable {
        public enum Action: String, Sendable, CaseIterable { case list, get, set, delete }
        public var action: Action
        public var room: String?
        public var key: String?
        public var value: String?
        /// Compare-and-set: only if the key's version here is this (0: it does not exist).
        public var ifVersion: UInt64?

        public init(action: Action, room: String? = nil, key: String? = nil, value: String? = nil, ifVersion: UInt64? = nil) {
            self.action = action
            self.room = room
            self.key = key
            self.value = value
            self.ifVersion = ifVersion
        }
    }

    /// What history a newcomer asks its inviter for (`accept`'s `history`: `all`, `none` or a number of
    /// the latest messages; `history_since_ms`: none older). The inviter's own bound applies on top.
    public struct JoinHistory: Equatable, Sendable {
        public static let limitRange = 0...1_000_000
        /// nil: all the inviter sends; 0: nothing.
        public var limit: Int?
        public var sinceMilliseconds: Int64?

        public init(limit: Int? = nil, sinceMilliseconds: Int64? = nil) {
            self.limit = limit
            self.sinceMilliseconds = sinceMilliseconds
        }

        public static let all = JoinHistory()

        /// `all`, `none` or a number (0-1000000), as `lanchat accept --history` and `params.history` take it.
        public init?(_ text: String, sinceMilliseconds: Int64? = nil) {
            switch text {
            case "all": self.init(sinceMilliseconds: sinceMilliseconds)
            case "none": self.init(limit: 0, sinceMilliseconds: sinceMilliseconds)
            default:
                guard let number = Int(text), Self.limitRange.contains(number) else { return nil }
                self.init(limit: number, sinceMilliseconds: sinceMilliseconds)
            }
        }

        var text: String? {
            switch limit {
            case nil: nil
            case 0: "none"
            case let number?: String(number)
            }
        }
    }

    public struct Invite: Equatable, Sendable {
        public var peer: String
        /// Nil: the room we are in, or the default room.
        public var room: String?
        /// Shown with the invitation (at most `maximumMessageBytes`).
        public var message: String?
        /// Seconds the peer has to answer.
        public var timeoutSeconds: Double
        /// Answer once the peer answered (or the time is up), not once the INVITE is sent.
        public var wait: Bool

        public static let maximumMessageBytes = 4096
        public static let timeoutRange: ClosedRange<Double> = 1...3600

        public init(peer: String, room: String? = nil, message: String? = nil, timeoutSeconds: Double = 60, wait: Bool = false) {
            self.peer = peer
            self.room = room
            self.message = message
            self.timeoutSeconds = timeoutSeconds
            self.wait = wait
        }
    }

    public struct Send: Equatable, Sendable {
        public var text: String
        /// Nil: the only room we are in.
        public var room: String?
        /// Nil: every member of the room.
        public var to: [String]?
        public var reliable: Bool

        public init(text: String, room: String? = nil, to: [String]? = nil, reliable: Bool = true) {
            self.text = text
            self.room = room
            self.to = to
            self.reliable = reliable
        }
    }

    public struct Search: Equatable, Sendable {
        public var room: String?
        public var limit: Int
        /// Words that must all begin words of a message (case and accents ignored).
        public var grep: String?
        /// A sender: display name or id prefix.
        public var from: String?
        /// Sent at or after (milliseconds since the epoch).
        public var sinceMilliseconds: Int64?

        public init(room: String? = nil, limit: Int = 50, grep: String? = nil, from: String? = nil, sinceMilliseconds: Int64? = nil) {
            self.room = room
            self.limit = limit
            self.grep = grep
            self.from = from
            self.sinceMilliseconds = sinceMilliseconds
        }
    }

    public static let pingCountRange = 1...100
    /// One answer holds them all in memory (about 300 bytes each as JSON): 100,000 is some 30 MB.
    public static let historyLimitRange = 1...100_000

    public var method: ControlMethod {
        switch self {
        case .status: .status
        case .peers: .peers
        case .watch: .watch
        case .ping: .ping
        case .invite: .invite
        case .invitations: .invitations
        case .accept: .accept
        case .decline: .decline
        case .rooms: .rooms
        case .members: .members
        case .leave: .leave
        case .send: .send
        case .history, .search: .history
        case .forget: .forget
        case .trust: .trust
        case .sendFile: .sendFile
        case .transfers: .transfers
        case .cancel: .cancel
        case .stream: .stream
        case .streamAccept: .streamAccept
        case .connect: .connect
        case .disconnect: .disconnect
        case .presence: .presence
        case .hand: .hand
        case .meta: .meta
        case .typing: .typing
        case .topicPublish: .topicPublish
        case .topicSubscribe: .topicSubscribe
        case .remove: .remove
        case .close: .close
        case .admin: .admin
        case .share: .share
        case .files: .files
        case .fetch: .fetch
        }
    }

    /// The parameters as they go on the wire (nil when the method takes none).
    public var parameters: [String: String]? {
        var p: [String: String] = [:]
        switch self {
        case .status, .peers, .watch, .invitations, .rooms, .transfers:
            return nil
        case .ping(let peer, let count):
            p = ["peer": peer, "count": String(count)]
        case .invite(let invite):
            p = ["peer": invite.peer, "timeout": String(invite.timeoutSeconds)]
            p["room"] = invite.room
            p["message"] = invite.message
            if invite.wait { p["wait"] = "true" }
        case .accept(let id, let history):
            p = ["id": id]
            p["history"] = history.text
            p["history_since_ms"] = history.sinceMilliseconds.map { String($0) }
        case .cancel(let id):
            p = ["id": id]
        case .decline(let id, let reason):
            p = ["id": id]
            p["reason"] = reason
        case .members(let room):
            p["room"] = room
        case .leave(let room):
            p = ["room": room]
        case .send(let send):
            p = ["text": send.text, "reliable": send.reliable ? "true" : "false"]
            p["room"] = send.room
            p["to"] = send.to?.joined(separator: ",")
        case .history(let room, let limit):
            p = ["limit": String(limit)]
            p["room"] = room
        case .search(let search):
            p = ["limit": String(search.limit)]
            p["room"] = search.room
            p["grep"] = search.grep
            p["from"] = search.from
            p["since_ms"] = search.sinceMilliseconds.map { String($0) }
        case .forget(let peer), .trust(let peer), .disconnect(let peer):
            p = ["peer": peer]
        case .sendFile(let peer, let path, let token):
            p = ["peer": peer, "path": path]
            p["file_token"] = token
        case .stream(let peer, let name):
            p = ["peer": peer, "name": name]
        case .streamAccept(let name, let from):
            p = ["name": name]
            p["peer"] = from
        case .connect(let address, let confirm):
            p = ["address": address]
            p["confirm"] = confirm
        case .presence(let availability, let text):
            p["availability"] = availability
            p["text"] = text
        case .hand(let up, let room):
            p = ["up": up ? "true" : "false"]
            p["room"] = room
        case .typing(let room):
            p["room"] = room
        case .topicPublish(let publish):
            p = ["topic": publish.topic, "text": publish.text]
            p["room"] = publish.room
            if publish.reliable { p["reliable"] = "true" }
        case .topicSubscribe(let room, let topic):
            p = ["topic": topic]
            p["room"] = room
        case .remove(let peer, let room, let reason):
            p = ["peer": peer]
            p["room"] = room
            p["reason"] = reason
        case .close(let room, let reason):
            p = ["room": room]
            p["reason"] = reason
        case .admin(let peer, let room, let on):
            p = ["peer": peer, "on": on ? "true" : "false"]
            p["room"] = room
        case .share(let room, let path, let token):
            p = ["room": room, "path": path]
            p["file_token"] = token
        case .files(let room, let limit):
            p = ["limit": String(limit)]
            p["room"] = room
        case .fetch(let id, let to):
            p = ["id": id]
            p["to"] = to
        case .meta(let meta):
            p = ["action": meta.action.rawValue]
            p["room"] = meta.room
            p["key"] = meta.key
            p["value"] = meta.value
            p["if_version"] = meta.ifVersion.map { String($0) }
        }
        return p
    }

    public func request(id: Int) -> ControlRequest {
        ControlRequest(id: id, method: method.rawValue, params: parameters)
    }

    /// Decodes and checks a request: an unknown method, a missing parameter or one out of range is a
    /// `ControlError` (`unknown_method`, `bad_request`) that says what to send instead.
    public init(_ request: ControlRequest) throws(ControlError) {
        guard let method = ControlMethod(rawValue: request.method) else { throw .unknownMethod(request.method) }
        let p = Parameters(method: method, values: request.params ?? [:])
        switch method {
        case .status: self = .status
        case .peers: self = .peers
        case .watch: self = .watch
        case .invitations: self = .invitations
        case .rooms: self = .rooms
        case .transfers: self = .transfers
        case .ping:
            self = .ping(peer: try p.required("peer"), count: try p.integer("count", in: Self.pingCountRange) ?? 1)
        case .invite:
            let message = p.optional("message")
            if let message, message.utf8.count > Invite.maximumMessageBytes {
                throw .badRequest("the invitation message is longer than \(Invite.maximumMessageBytes) bytes")
            }
            var timeout = 60.0
            if let text = p.optional("timeout") {
                guard let value = Double(text), Invite.timeoutRange.contains(value) else { throw .badRequest("timeout must be 1-3600 seconds") }
                timeout = value
            }
            self = .invite(
                Invite(
                    peer: try p.required("peer"), room: p.optional("room"), message: message, timeoutSeconds: timeout,
                    wait: try p.flag("wait", default: false)))
        case .accept:
            let since = try p.integer("history_since_ms", in: 0...Int(Int64.max)).map { Int64($0) }
            var history = JoinHistory(sinceMilliseconds: since)
            if let text = p.optional("history") {
                guard let chosen = JoinHistory(text, sinceMilliseconds: since) else {
                    throw .badRequest("params.history must be all, none or a number of messages (0-1000000), not '\(text.prefix(16))'")
                }
                history = chosen
            }
            self = .accept(id: try p.required("id"), history: history)
        case .decline: self = .decline(id: try p.required("id"), reason: p.optional("reason"))
        case .members: self = .members(room: p.optional("room"))
        case .leave: self = .leave(room: try p.required("room"))
        case .send:
            // The text may be empty; it must be there.
            guard let text = p.values["text"] else { throw .badRequest("send needs params.text") }
            let to = p.optional("to").map { list in
                list.split(separator: ",").map { String($0.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed()) }.filter { !$0.isEmpty }
            }
            self = .send(Send(text: text, room: p.optional("room"), to: to, reliable: try p.flag("reliable", default: true)))
        case .history:
            let limit = try p.integer("limit", in: Self.historyLimitRange) ?? 50
            let since = try p.integer("since_ms", in: 0...Int(Int64.max)).map { Int64($0) }
            let (room, grep, from) = (p.optional("room"), p.optional("grep"), p.optional("from"))
            if let grep, grep.utf8.count > 1024 { throw .badRequest("params.grep is longer than 1024 bytes") }
            if grep != nil || from != nil || since != nil {
                self = .search(Search(room: room, limit: limit, grep: grep, from: from, sinceMilliseconds: since))
            } else {
                self = .history(room: room, limit: limit)
            }
        case .forget:
            guard let peer = p.optional("peer") else { throw .badRequest("forget needs params.peer (a display name)") }
            self = .forget(peer: peer)
        case .trust:
            guard let peer = p.optional("peer") else { throw .badRequest("trust needs params.peer (a name or an id prefix)") }
            self = .trust(peer: peer)
        case .sendFile:
            let peer = try p.required("peer")
            guard let path = p.optional("path"), path.hasPrefix("/") else { throw .badRequest("send-file needs params.path, an absolute path") }
            self = .sendFile(peer: peer, path: path, fileToken: p.optional("file_token"))
        case .cancel: self = .cancel(id: try p.required("id"))
        case .stream: self = .stream(peer: try p.required("peer"), name: try p.required("name"))
        case .streamAccept: self = .streamAccept(name: try p.required("name"), from: p.optional("peer"))
        case .connect:
            guard let address = p.optional("address") else { throw .badRequest("connect needs params.address (HOST[:PORT])") }
            self = .connect(address: address, confirm: p.optional("confirm"))
        case .disconnect: self = .disconnect(peer: try p.required("peer"))
        case .presence:
            let availability = p.optional("availability")
            if let availability, !Self.availabilities.contains(availability) {
                throw .badRequest("params.availability must be \(Self.availabilities.joined(separator: ", ")), not '\(availability.prefix(16))'")
            }
            let text = p.values["text"]
            if let text, text.utf8.count > Self.maximumStatusText {
                throw .badRequest("the status text is longer than \(Self.maximumStatusText) bytes (\(text.utf8.count))")
            }
            self = .presence(availability: availability, text: text)
        case .hand: self = .hand(up: try p.flag("up", default: true), room: p.optional("room"))
        case .typing: self = .typing(room: p.optional("room"))
        case .topicPublish:
            // The text may be empty; it must be there.
            guard let text = p.values["text"] else { throw .badRequest("topic-pub needs params.text") }
            self = .topicPublish(
                TopicPublish(
                    room: p.optional("room"), topic: try p.required("topic"), text: text,
                    reliable: try p.flag("reliable", default: false)))
        case .topicSubscribe: self = .topicSubscribe(room: p.optional("room"), topic: try p.required("topic"))
        case .remove, .close:
            let reason = p.optional("reason")
            if let reason, reason.utf8.count > Self.maximumStatusText {
                throw .badRequest("the reason is longer than \(Self.maximumStatusText) bytes (\(reason.utf8.count))")
            }
            self =
                method == .remove
                ? .remove(peer: try p.required("peer"), room: p.optional("room"), reason: reason)
                : .close(room: try p.required("room"), reason: reason)
        case .admin: self = .admin(peer: try p.required("peer"), room: p.optional("room"), on: try p.flag("on", default: true))
        case .share:
            guard let path = p.optional("path"), path.hasPrefix("/") else { throw .badRequest("share needs params.path, an absolute path") }
            self = .share(room: try p.required("room"), path: path, fileToken: p.optional("file_token"))
        case .files: self = .files(room: p.optional("room"), limit: try p.integer("limit", in: Self.historyLimitRange) ?? 100)
        case .fetch:
            let to = p.optional("to")
            if let to, !to.hasPrefix("/") { throw .badRequest("params.to must be an absolute path (a directory)") }
            self = .fetch(id: try p.required("id"), to: to)
        case .meta:
            let text = try p.required("action")
            guard let action = Meta.Action(rawValue: text) else {
                throw .badRequest("params.action must be \(Meta.Action.allCases.map(\.rawValue).joined(separator: ", ")), not '\(text.prefix(16))'")
            }
            let key = p.optional("key")
            if action != .list, key == nil { throw .badRequest("meta \(action.rawValue) needs params.key") }
            // A value may be empty; for set it must be there.
            let value = p.values["value"]
            if action == .set, value == nil { throw .badRequest("meta set needs params.value") }
            let version = try p.integer("if_version", in: 0...Int(Int64.max)).map { UInt64($0) }
            self = .meta(Meta(action: action, room: p.optional("room"), key: key, value: action == .set ? value : nil, ifVersion: version))
        }
    }

    public static let availabilities = ["available", "away", "busy"]
    public static let maximumStatusText = 128

    /// Reads one request's string parameters; an empty string counts as absent.
    private struct Parameters {
        let method: ControlMethod
        let values: [String: String]

        func optional(_ key: String) -> String? {
            guard let value = values[key], !value.isEmpty else { return nil }
            return value
        }

        func required(_ key: String) throws(ControlError) -> String {
            guard let value = optional(key) else { throw .badRequest("\(method.rawValue) needs params.\(key)") }
            return value
        }

        func integer(_ key: String, in range: ClosedRange<Int>) throws(ControlError) -> Int? {
            guard let text = optional(key) else { return nil }
            guard let value = Int(text), range.contains(value) else {
                throw .badRequest("params.\(key) must be \(range.lowerBound)-\(range.upperBound)")
            }
            return value
        }

        /// "true" or "false" (what the Python client sends for booleans).
        func flag(_ key: String, default value: Bool) throws(ControlError) -> Bool {
            switch optional(key) {
            case nil: return value
            case "true": return true
            case "false": return false
            case let other?: throw .badRequest("params.\(key) must be \"true\" or \"false\", not '\(other.prefix(16))'")
            }
        }
    }
}
