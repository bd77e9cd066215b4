import DNSSD
import LanchatCore
@testable import LanchatDiscovery
import Testing

private func instance(_ name: String, interface: UInt32 = 2) -> ServiceInstance {
    ServiceInstance(name: name, type: "_chat-service._tcp.", domain: "local.", interfaceIndex: interface)
}

private func service(id: PeerID?, name: String = "peer", host: String = "h2.local", port: UInt16 = 4000) -> ResolvedService {
    var txt = TXTRecord(["v": "1", "name": name])
    if let id { txt["id"] = Array(id.rawValue.utf8) }
    return ResolvedService(hostName: host, port: port, txt: try! txt.encode(), interfaceIndex: 2)
}

private func events(_ actions: [PeerTable.Action]) -> [String] {
    actions.map {
        switch $0 {
        case .resolve(let i): return "resolve \(i.name)"
        case .emit(.found(let p)): return "found \(p.instanceName)"
        case .emit(.changed(let p)): return "changed \(p.instanceName)"
        case .emit(.lost(let p)): return "lost \(p.instanceName)"
        }
    }
}

@Suite struct PeerTableTests {
    @Test func addResolveListsAndRemoveLoses() {
        var table = PeerTable(ownID: idSelf)
        #expect(events(table.added(instance("a"))) == ["resolve a"])
        #expect(table.peers.isEmpty)
        #expect(events(table.resolved(instance("a"), service(id: idA), addresses: ["198.18.0.12"])) == ["found a"])
        #expect(table.peers.map(\.instanceName) == ["a"])
        #expect(table.peers.first?.addresses == ["198.18.0.12"])
        #expect(events(table.removed(instance("a"))) == ["lost a"])
        #expect(table.peers.isEmpty)
    }

    @Test func aFloodFromOneHostListsAtMostEightOfItsInstancesAndLeavesOthersListed() {
        var table = PeerTable(ownID: idSelf)
        for n in 0..<2000 {
            _ = table.added(instance("fake \(n)"))
            _ = table.resolved(instance("fake \(n)"), service(id: nil, name: "fake", host: "evil-\(n % 3).local"), addresses: ["198.18.0.66"])
        }
        // The same address under other host names counts as the same host.
        #expect(table.peers.count == PeerTable.maximumPerHost)
        #expect(table.instancesToRefresh.count == PeerTable.maximumPerHost)
        #expect(events(table.added(instance("real"))) == ["resolve real"])
        #expect(events(table.resolved(instance("real"), service(id: idA, host: "h2.local"), addresses: ["198.18.0.12"])) == ["found real"])
        // And the table stops growing at its cap: later instances are not even resolved.
        for n in 2000..<PeerTable.maximumEntries { _ = table.added(instance("fake \(n)")) }
        #expect(table.added(instance("one too many")).isEmpty)
    }

    @Test func repeatedReportsAreDeduplicated() {
        var table = PeerTable(ownID: idSelf)
        _ = table.added(instance("a", interface: 2))
        #expect(table.added(instance("a", interface: 2)).isEmpty)
        #expect(table.added(instance("a", interface: 3)).isEmpty)
        _ = table.resolved(instance("a"), service(id: idA), addresses: [])
        // Gone from one interface only: still listed.
        #expect(table.removed(instance("a", interface: 2)).isEmpty)
        #expect(table.peers.count == 1)
        #expect(events(table.removed(instance("a", interface: 3))) == ["lost a"])
    }

    @Test func ourOwnAdvertisementIsNeverListed() {
        var table = PeerTable(ownID: idSelf)
        _ = table.added(instance("me"))
        #expect(table.resolved(instance("me"), service(id: idSelf), addresses: []).isEmpty)
        #expect(table.peers.isEmpty)
        #expect(table.ownInstanceNames == ["me"])
        #expect(table.removed(instance("me")).isEmpty)
    }

    @Test func foreignServiceIsListedAsIncompatible() {
        var table = PeerTable(ownID: idSelf)
        _ = table.added(instance("printer"))
        let junk = ResolvedService(hostName: "x.local", port: 1, txt: [3, 0x01, 0x02, 0x03, 9], interfaceIndex: 2)
        #expect(events(table.resolved(instance("printer"), junk, addresses: [])) == ["found printer"])
        #expect(table.peers.first?.isCompatible == false)
        #expect(table.peers.first?.problem == .missingKey("v"))
    }

    @Test func changesAreReportedOnlyWhenSomethingChanged() {
        var table = PeerTable(ownID: idSelf)
        _ = table.added(instance("a"))
        _ = table.resolved(instance("a"), service(id: idA), addresses: ["198.18.0.12"])
        #expect(table.resolved(instance("a"), service(id: idA), addresses: ["198.18.0.12"]).isEmpty)
        #expect(events(table.resolved(instance("a"), service(id: idA, name: "renamed"), addresses: ["198.18.0.12"])) == ["changed a"])
        #expect(table.peers.first?.advertisement?.displayName == "renamed")
    }

    @Test func resolveAfterRemovalIsIgnored() {
        var table = PeerTable(ownID: idSelf)
        _ = table.added(instance("a"))
        _ = table.removed(instance("a"))
        #expect(!table.knows(instance("a")))
        #expect(table.resolved(instance("a"), service(id: idA), addresses: []).isEmpty)
        #expect(table.peers.isEmpty)
    }

    @Test func sweepAfterBrowseRestartDropsOnlyUnseenPeers() {
        var table = PeerTable(ownID: idSelf)
        for name in ["a", "b"] {
            _ = table.added(instance(name))
            _ = table.resolved(instance(name), service(id: name == "a" ? idA : idB), addresses: [])
        }
        table.browseRestarted()
        #expect(table.added(instance("a")).isEmpty)  // known: no new resolve, no event
        #expect(events(table.sweep()) == ["lost b"])
        #expect(table.peers.map(\.instanceName) == ["a"])
    }

    @Test func sameNameOnTwoHostsStaysDistinct() {
        var table = PeerTable(ownID: idSelf)
        _ = table.added(instance("alice"))
        _ = table.added(instance("alice #2"))
        _ = table.resolved(instance("alice"), service(id: idA, name: "alice"), addresses: [])
        _ = table.resolved(instance("alice #2"), service(id: idB, name: "alice"), addresses: [])
        #expect(table.peers.compactMap(\.advertisement?.peerID).sorted() == [idA, idB].sorted())
    }

    @Test func refreshListsOnlyListedPeers() {
        var table = PeerTable(ownID: idSelf)
        _ = table.added(instance("pending"))
        _ = table.added(instance("a"))
        _ = table.resolved(instance("a"), service(id: idA), addresses: [])
        #expect(table.instancesToRefresh.map(\.name) == ["a"])
    }
}

@Suite struct PeerQueryTests {
    func peer(_ name: String, _ id: PeerID, instance: String? = nil) -> DiscoveredPeer {
        DiscoveredPeer(
            instanceName: instance ?? name, advertisement: PeerAdvertisement(peerID: id, displayName: name), problem: nil,
            hostName: "h.local", port: 1, addresses: [], interfaceIndices: [2])
    }

    @Test func namesInstancesAndIDPrefixes() throws {
        let peers = [peer("alice", idA), peer("bob", idB, instance: "bob #2")]
        #expect(try PeerQuery.match("alice", in: peers).get().advertisement?.peerID == idA)
        #expect(try PeerQuery.match("bob #2", in: peers).get().advertisement?.peerID == idB)
        #expect(try PeerQuery.match(String(idB.rawValue.prefix(6)).uppercased(), in: peers).get().advertisement?.peerID == idB)
    }

    @Test func ambiguityListsTheCandidates() {
        let peers = [peer("alice", idA), peer("alice", idB, instance: "alice #2")]
        guard case .failure(.ambiguous(_, let candidates)) = PeerQuery.match("alice", in: peers) else {
            Issue.record("not ambiguous")
            return
        }
        #expect(candidates.count == 2 && candidates.allSatisfy { $0.hasPrefix("alice (") })
    }

    @Test func shortPrefixesUnknownNamesAndEmptyQueriesFail() {
        let peers = [peer("alice", idA)]
        #expect(PeerQuery.match(String(idA.rawValue.prefix(3)), in: peers) == .failure(.noMatch(String(idA.rawValue.prefix(3)))))
        #expect(PeerQuery.match("carol", in: peers) == .failure(.noMatch("carol")))
        #expect(PeerQuery.match("", in: peers) == .failure(.empty))
    }
}
