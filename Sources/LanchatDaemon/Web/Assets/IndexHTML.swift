extension WebAssets {
    /// The one page. No inline script or style (the Content-Security-Policy forbids them).
    static let indexHTML = #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>lanchat</title>
        <link rel="stylesheet" href="/style.css">
        <script type="module" src="/app.js"></script>
        </head>
        <body>
        <a class="skip" href="#text">Skip to the message box</a>
        <header>
          <h1>lanchat</h1>
          <p id="me" aria-label="You"></p>
          <p id="connection" role="status" aria-live="polite">connecting…</p>
          <form id="presence-form" aria-label="Your status">
            <label for="availability">Status</label>
            <select id="availability"><option>available</option><option>away</option><option>busy</option></select>
            <label for="status-text" class="visually-hidden">Status text</label>
            <input id="status-text" maxlength="128" placeholder="status text">
            <button type="submit">Set</button>
          </form>
        </header>
        <div class="layout">
          <nav aria-label="People and rooms">
            <section aria-labelledby="invitations-title" id="invitations-section" hidden>
              <h2 id="invitations-title">Invitations</h2>
              <ul id="invitations"></ul>
            </section>
            <section aria-labelledby="rooms-title">
              <h2 id="rooms-title">Rooms</h2>
              <ul id="rooms"></ul>
            </section>
            <section aria-labelledby="members-title">
              <h2 id="members-title">Members</h2>
              <ul id="members"></ul>
            </section>
            <section aria-labelledby="peers-title">
              <h2 id="peers-title">Peers nearby</h2>
              <p class="hint">Compare the code with the one on the other person's screen before you trust them.</p>
              <ul id="peers"></ul>
              <form id="invite-form" aria-label="Invite a peer">
                <label for="invite-peer">Invite</label>
                <select id="invite-peer"></select>
                <label for="invite-room">to room</label>
                <input id="invite-room" value="lobby" maxlength="32" pattern="[A-Za-z0-9\-]{1,32}" required>
                <label for="invite-message">with a message</label>
                <input id="invite-message" maxlength="4096">
                <button type="submit">Invite</button>
              </form>
            </section>
          </nav>
          <main aria-labelledby="room-title">
            <h2 id="room-title">No room yet</h2>
            <ul id="room-meta" aria-label="Room topic and metadata"></ul>
            <form id="topic-form" aria-label="The room's topic">
              <label for="topic">Topic</label>
              <input id="topic" maxlength="4096">
              <button type="submit">Set topic</button>
            </form>
            <div id="room-tools"></div>
            <form id="search-form" role="search" aria-label="Search this room">
              <label for="search" class="visually-hidden">Search this room</label>
              <input id="search" type="search" placeholder="Search this room" maxlength="1024">
              <button type="submit">Search</button>
              <button type="button" id="search-clear" hidden>Show all</button>
            </form>
            <ol id="messages" role="log" aria-live="polite" aria-label="Conversation"></ol>
            <p id="typing" aria-live="polite"></p>
            <form id="send-form">
              <label for="text">Message</label>
              <input id="text" name="text" autocomplete="off" maxlength="65536" placeholder="Write a message">
              <button type="submit" id="send">Send</button>
            </form>
            <div class="tools">
              <label class="button">Send a file… <input id="file" type="file" multiple class="visually-hidden"></label>
              <label for="file-to">to</label>
              <select id="file-to"><option value="">everyone in the room</option></select>
              <button type="button" id="hand" aria-pressed="false">Raise hand</button>
              <button type="button" id="notify">Notify me of invitations</button>
            </div>
            <section aria-labelledby="transfers-title">
              <h2 id="transfers-title">Transfers</h2>
              <ul id="transfers"></ul>
            </section>
            <p id="notice" role="status"></p>
            <p id="error" role="alert"></p>
          </main>
        </div>
        </body>
        </html>
        """#
}
