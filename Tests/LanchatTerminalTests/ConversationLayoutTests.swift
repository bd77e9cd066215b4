import LanchatTerminal
import Testing

@Suite struct ConversationLayoutTests {
    @Test func aLineIsWrappedAtTheWidthAndNothingIsLost() {
        #expect(ConversationLayout.wrap("abcdefghij", width: 4) == ["abcd", "efgh", "ij"])
        #expect(ConversationLayout.wrap("abcd", width: 4) == ["abcd"])
        #expect(ConversationLayout.wrap("", width: 4) == [""])
        let long = String(repeating: "0123456789", count: 13)
        #expect(ConversationLayout.wrap(long, width: 40).joined() == long)
        #expect(ConversationLayout.wrap(long, width: 40).map(ConversationLayout.displayWidth) == [40, 40, 40, 10])
    }

    @Test func wideCharactersTakeTwoColumnsAndGoWholeToTheNextRow() {
        #expect(ConversationLayout.displayWidth("日本語") == 6)
        #expect(ConversationLayout.displayWidth("한국어 ok") == 9)
        #expect(ConversationLayout.displayWidth("ｆｕｌｌ") == 8)
        // 5 columns: "a日本" is 5; "語" starts the next row.
        #expect(ConversationLayout.wrap("a日本語", width: 5) == ["a日本", "語"])
        // 4 columns: "a日" is 3, "本" (2) does not fit in the one left, as a terminal leaves it blank.
        #expect(ConversationLayout.wrap("a日本語", width: 4) == ["a日", "本語"])
        // A wide character in a window one column wide still gets a row of its own.
        #expect(ConversationLayout.wrap("日本", width: 1) == ["日", "本"])
    }

    @Test func combiningMarksAndEmojiAreCountedAsTheTerminalShowsThem() {
        #expect(ConversationLayout.width(of: "e\u{301}") == 1)
        #expect(ConversationLayout.displayWidth("cafe\u{301}") == 4)
        #expect(ConversationLayout.width(of: "👍") == 2)
        #expect(ConversationLayout.width(of: "👨‍👩‍👧") == 2)
        #expect(ConversationLayout.width(of: "🇫🇷") == 2)
        #expect(ConversationLayout.width(of: "❤\u{FE0F}") == 2)
        #expect(ConversationLayout.width(of: "é") == 1)
        #expect(ConversationLayout.width(of: "\u{301}") == 0)
        #expect(ConversationLayout.wrap("ab👍cd", width: 3) == ["ab", "👍c", "d"])
    }

    @Test func escapeSequencesOtherThanStylesAreShownAsQuestionMarks() {
        // A cursor move, a tab and a carriage return would move the cursor: each is one "?" column.
        #expect(ConversationLayout.wrap("a\u{1b}[2Jb\tc\rd", width: 80) == ["a?[2Jb?c?d"])
        #expect(ConversationLayout.displayWidth("x\u{1b}]0;title\u{7}") == 11)
    }

    @Test func stylesTakeNoColumnAndEachRowStandsOnItsOwn() {
        let bold = "\u{1b}[1;31m"
        let reset = "\u{1b}[0m"
        let line = "12 \(bold)alice\(reset): hello"
        #expect(ConversationLayout.displayWidth(line) == 15)
        #expect(ConversationLayout.wrap(line, width: 15) == [line])
        // The name cut in two: the first row ends with a reset, the second starts in the name's colour.
        #expect(ConversationLayout.wrap(line, width: 6) == ["12 \(bold)ali\(reset)", "\(bold)ce\(reset): he", "llo"])
    }

    @Test func theLastRowsAreBottomAligned() {
        // Fewer rows than the area: empty rows above, the last line on the bottom row.
        #expect(ConversationLayout.rows(["one", "two"], width: 10, height: 4) == ["", "", "one", "two"])
        // More: the earliest are left out.
        #expect(ConversationLayout.rows(["one", "two", "three"], width: 10, height: 2) == ["two", "three"])
        #expect(ConversationLayout.rows([], width: 10, height: 3) == ["", "", ""])
        #expect(ConversationLayout.rows(["one"], width: 10, height: 0) == [])
    }

    @Test func aMessageWiderThanTheWindowThatIsNotTheLastKeepsItsWrappedRows() {
        let long = "12:00:01 bob: " + String(repeating: "wrapped ", count: 8) + "END"
        let lines = ["12:00:00 bob: first", long, "12:00:02 bob: last"]
        let rows = ConversationLayout.rows(lines, width: 20, height: 10)
        #expect(rows.count == 10)
        #expect(rows.last == "12:00:02 bob: last")
        let used = rows.drop { $0.isEmpty }
        #expect(used.count == 1 + ConversationLayout.wrap(long, width: 20).count + 1)
        #expect(used.allSatisfy { !$0.isEmpty && ConversationLayout.displayWidth($0) <= 20 })
        #expect(used.dropFirst().dropLast().joined() == long)
        #expect(used.first == "12:00:00 bob: first")
    }

    @Test func aWindowShorterThanOneMessageShowsItsEnd() {
        let long = String(repeating: "abcdefghij", count: 5)
        #expect(ConversationLayout.rows(["before", long], width: 10, height: 3) == ["abcdefghij", "abcdefghij", "abcdefghij"])
        #expect(ConversationLayout.rows([long + "XY", "after"], width: 10, height: 3) == ["abcdefghij", "XY", "after"])
    }

    @Test func theSameConversationAtAnotherWidthIsTheSameText() {
        let lines = ["12:00:00 alice: 日本語のメッセージです", "12:00:01 bob: " + String(repeating: "x", count: 130), "* joined lab"]
        for width in [10, 11, 40, 100] {
            let rows = ConversationLayout.rows(lines, width: width, height: 200)
            #expect(rows.joined() == lines.joined())
            #expect(rows.allSatisfy { ConversationLayout.displayWidth($0) <= width })
        }
    }
}
