extension WebAssets {
    /// The page's script, an ES module. It speaks the control API's JSON over one WebSocket (the same
    /// calls and events as `lanchat`); everything that comes from peers goes into the page as text
    /// (`textContent`, attribute values), never as HTML. Two halves of one module, served as one file:
    /// the connection and the lists (here), the conversation (`appJSConversation`).
    static let appJS = appJSLists + "\n\n" + appJSConversation

    /// The connection, the calls, and the lists: peers, invitations, rooms, presence, the topic.
    static let appJSLists = #"""
        const tokenKey = 'lanchat.token';
        const fragment = new URLSearchParams(location.hash.slice(1));
        let token = fragment.get('token');
        if (token) {
          // Kept for reloads of this tab only, and taken out of the address bar.
          sessionStorage.setItem(tokenKey, token);
          history.replaceState(null, '', location.pathname);
        } else {
          token = sessionStorage.getItem(tokenKey);
        }

        const $ = (id) => document.getElementById(id);
        const imageName = /\.(png|jpe?g|gif|webp)$/i;

        function el(tag, text, className) {
          const node = document.createElement(tag);
          if (text !== undefined && text !== null) node.textContent = String(text);
          if (className) node.className = className;
          return node;
        }

        function button(label, onClick, accessibleName) {
          const node = el('button', label);
          node.type = 'button';
          if (accessibleName) node.setAttribute('aria-label', accessibleName);
          node.addEventListener('click', onClick);
          return node;
        }

        const state = {
          socket: null, nextId: 1, pending: new Map(), me: null, room: null, rooms: [],
          transfers: new Map(), shownImages: new Set(), typingTimer: null, lastTyping: 0, hands: [], search: '', peers: [], limit: 200, fetchedImages: new Map(), shownKeys: new Set(),
        };

        function showError(message) { $('error').textContent = message || ''; }
        function showNotice(message) { $('notice').textContent = message || ''; }

        function call(method, params) {
          return new Promise((resolve, reject) => {
            if (!state.socket || state.socket.readyState !== WebSocket.OPEN) {
              reject(new Error('not connected to lanchatd'));
              return;
            }
            const id = state.nextId++;
            state.pending.set(id, { resolve, reject });
            const request = { id, method };
            if (params) {
              request.params = {};
              for (const [key, value] of Object.entries(params)) {
                if (value !== undefined && value !== null) request.params[key] = String(value);
              }
            }
            state.socket.send(JSON.stringify(request));
          });
        }

        function connect() {
          if (!token) {
            $('connection').textContent = 'No token: open the address that `lanchat web` prints.';
            return;
          }
          const socket = new WebSocket(`ws://${location.host}/ws?token=${encodeURIComponent(token)}`);
          state.socket = socket;
          let opened = false;
          socket.addEventListener('open', async () => {
            opened = true;
            state.refusals = 0;
            $('connection').textContent = 'connected';
            document.body.dataset.connected = 'true';
            try {
              await call('watch');
              await refreshAll();
            } catch (error) { showError(error.message); }
          });
          socket.addEventListener('message', (message) => {
            let response;
            try { response = JSON.parse(message.data); } catch { return; }
            if (response.event) { onEvent(response.event); return; }
            const waiting = state.pending.get(response.id);
            if (waiting) {
              state.pending.delete(response.id);
              if (response.ok) waiting.resolve(response);
              else waiting.reject(new Error(response.error ? response.error.message : 'failed'));
            } else if (!response.ok && response.error) {
              showError(response.error.message);
            }
          });
          socket.addEventListener('close', () => {
            document.body.dataset.connected = 'false';
            for (const waiting of state.pending.values()) waiting.reject(new Error('the connection to lanchatd closed'));
            state.pending.clear();
            // Refused at once, again and again: lanchatd restarted (a new token) or is gone.
            state.refusals = opened ? 0 : (state.refusals || 0) + 1;
            $('connection').textContent = state.refusals >= 3
              ? 'cannot connect: lanchatd stopped, or restarted with a new token (run `lanchat web` again); still trying…'
              : 'disconnected; trying again…';
            setTimeout(connect, Math.min(2000 * Math.max(state.refusals, 1), 10000));
          });
        }

        async function refreshAll() {
          const status = await call('status');
          state.me = status.status;
          $('me').textContent = `${state.me.name} (${state.me.short_id})`;
          await Promise.all([refreshPeers(), refreshInvitations(), refreshRooms(), refreshTransfers(), refreshPresence()]);
          await refreshHistory();
        }

        // The short code both people compare: the same formula as `lanchat ping` (SHA-256 of both ids).
        async function shortCode(a, b) {
          if (!crypto.subtle) return null;
          const [first, second] = a < b ? [a, b] : [b, a];
          const data = new TextEncoder().encode(`lanchat short code v1\n${first}\n${second}`);
          const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', data));
          let number = 0n;
          for (let i = 0; i < 8; i++) number = (number << 8n) | BigInt(digest[i]);
          const digits = (number % 100000000n).toString().padStart(8, '0');
          return `${digits.slice(0, 4)}-${digits.slice(4)}`;
        }

        async function refreshPeers() {
          const answer = await call('peers');
          const list = $('peers');
          const items = [];
          for (const peer of answer.peers || []) {
            const item = el('li');
            item.dataset.peerId = peer.id || '';
            item.append(el('span', peer.name, 'name'), ' ');
            const code = peer.id && state.me ? await shortCode(state.me.id, peer.id) : null;
            if (code) item.append(el('span', code, 'code'), ' ');
            item.append(el('span', `${peer.short_id || ''} · ${peer.state}`, 'meta'));
            items.push(item);
          }
          if (items.length === 0) items.push(el('li', 'No peers found yet.', 'meta'));
          list.replaceChildren(...items);
          state.peers = (answer.peers || []).filter((peer) => peer.id);
          const chosen = $('invite-peer').value;
          $('invite-peer').replaceChildren(...state.peers.map((peer) => {
            const option = el('option', `${peer.name} (${peer.short_id})`);
            option.value = peer.id;
            return option;
          }));
          if (state.peers.some((peer) => peer.id === chosen)) $('invite-peer').value = chosen;
        }

        async function refreshInvitations() {
          const answer = await call('invitations');
          const invitations = answer.invitations || [];
          $('invitations-section').hidden = invitations.length === 0;
          $('invitations').replaceChildren(...invitations.map((invitation) => {
            const item = el('li');
            item.dataset.invitationId = invitation.id;
            item.append(el('span', invitation.from, 'name'), ' invites you to ', el('strong', invitation.room));
            item.append(el('div', `code ${invitation.short_code}`, 'code'));
            if (invitation.message) item.append(el('div', invitation.message, 'meta'));
            const scope = el('select');
            for (const [value, label] of [['all', 'all history'], ['100', 'the last 100 messages'], ['none', 'no history']]) {
              const option = el('option', label);
              option.value = value;
              scope.append(option);
            }
            scope.setAttribute('aria-label', 'History to take');
            const reason = el('input');
            reason.maxLength = 128;
            reason.placeholder = 'reason (if you decline)';
            reason.setAttribute('aria-label', 'Reason to decline');
            item.append(
              scope, ' ',
              button('Accept', () => answerInvitation(invitation, true, { history: scope.value }),
                `Accept the invitation from ${invitation.from} to ${invitation.room}`),
              reason, ' ',
              button('Decline', () => answerInvitation(invitation, false, { reason: reason.value || undefined }),
                `Decline the invitation from ${invitation.from} to ${invitation.room}`));
            return item;
          }));
        }

        async function answerInvitation(invitation, accept, extra) {
          try {
            await call(accept ? 'accept' : 'decline', { id: invitation.id, ...extra });
            if (accept) state.room = invitation.room;
            await refreshInvitations();
            await refreshRooms();
            await refreshHistory();
          } catch (error) { showError(error.message); }
        }

        async function refreshRooms() {
          const answer = await call('rooms');
          state.rooms = answer.rooms || [];
          if (!state.rooms.some((room) => room.room === state.room)) state.room = state.rooms.length ? state.rooms[0].room : null;
          $('rooms').replaceChildren(...state.rooms.map((room) => {
            const item = el('li');
            const choose = button(room.room, async () => {
              state.room = room.room;
              state.limit = 200;
              await refreshRooms();
              await refreshHistory();
            });
            choose.className = room.room === state.room ? 'room current' : 'room';
            if (room.room === state.room) choose.setAttribute('aria-current', 'true');
            item.append(choose);
            return item;
          }));
          $('room-title').textContent = state.room ? `Room ${state.room}` : 'No room yet: accept an invitation';
          const room = state.rooms.find((candidate) => candidate.room === state.room);
          const members = room ? room.members : [];
          $('members').replaceChildren(...members.map((member) => {
            const item = el('li');
            item.dataset.memberId = member.id;
            item.append(el('span', member.name, 'name'), ' ');
            let detail = member.state;
            if (member.availability) detail += ` · ${member.availability}`;
            if (member.status_text) detail += ` (${member.status_text})`;
            item.append(el('span', detail, 'meta'));
            if (member.hand) item.append(' ', el('span', 'hand raised', 'hand'));
            if (room.administered) {
              item.append(' ', button('Remove', async () => {
                if (!confirm(`Remove ${member.name} from ${room.room}?`)) return;
                try { await call('remove', { peer: member.id, room: room.room }); await refreshRooms(); } catch (error) { showError(error.message); }
              }, `Remove ${member.name} from ${room.room}`));
              item.append(' ', button(member.admin ? 'Not admin' : 'Make admin', async () => {
                try { await call('admin', { peer: member.id, room: room.room, on: !member.admin }); await refreshRooms(); } catch (error) { showError(error.message); }
              }, `${member.admin ? 'Stop' : 'Make'} ${member.name} ${member.admin ? 'administering' : 'an administrator of'} ${room.room}`));
            }
            if (member.admin) item.append(' ', el('span', 'admin', 'meta'));
            return item;
          }));
          const target = $('file-to').value;
          const everyone = el('option', 'everyone in the room');
          everyone.value = '';
          const share = el('option', 'the room, kept for later (share)');
          share.value = 'share';
          $('file-to').replaceChildren(everyone, share, ...members.map((member) => {
            const option = el('option', member.name);
            option.value = member.id;
            return option;
          }));
          if (target === 'share' || members.some((member) => member.id === target)) $('file-to').value = target;
          const tools = [];
          if (room && room.administered) {
            tools.push(button('Close this room', async () => {
              if (!confirm(`Close ${room.room} for everyone?`)) return;
              try { await call('close', { room: room.room }); await refreshRooms(); await refreshHistory(); } catch (error) { showError(error.message); }
            }));
          }
          if (room) {
            tools.push(button('Leave this room', async () => {
              if (!confirm(`Leave ${room.room}?`)) return;
              try { await call('leave', { room: room.room }); await refreshRooms(); await refreshHistory(); } catch (error) { showError(error.message); }
            }));
          }
          $('room-tools').replaceChildren(...tools);
          updateHandButton();
        }

        async function refreshPresence() {
          const answer = await call('presence');
          state.hands = answer.presence ? answer.presence.hands : [];
          if (answer.presence && document.activeElement !== $('status-text')) {
            $('availability').value = answer.presence.availability;
            $('status-text').value = answer.presence.text || '';
          }
          updateHandButton();
        }

        function updateHandButton() {
          const raised = state.room !== null && state.hands.includes(state.room);
          $('hand').setAttribute('aria-pressed', raised ? 'true' : 'false');
          $('hand').textContent = raised ? 'Lower hand' : 'Raise hand';
          $('hand').disabled = state.room === null;
        }

        function messageItem(message) {
          const item = el('li');
          item.dataset.messageId = message.id;
          const time = new Date(message.timestamp_ms);
          item.append(el('time', time.toLocaleTimeString(), 'time'));
          if (message.kind === 'system') {
            item.className = 'system';
            item.append(el('span', message.text));
          } else if (message.kind === 'file' && message.file) {
            item.dataset.fileId = message.file.id;
            item.dataset.fileKey = `${message.file.name}/${message.file.size}`;
            item.append(el('span', message.sender, 'sender'), el('span', `shared ${message.file.name}`, 'text'), ' ', fileTools(message.file));
          } else {
            item.append(el('span', message.sender, 'sender'), el('span', message.text, 'text'));
          }
          return item;
        }

        // A file shared in the room: its size, and a button that fetches it (`fetch`: copied at once
        // when this host keeps it, else asked of the members); an image is then shown inline.
        function fileTools(file) {
          const span = el('span', `(${file.size} bytes) `, 'meta');
          span.append(button(file.image ? 'Fetch and show' : 'Fetch', async () => {
            try {
              const answer = await call('fetch', { id: file.id });
              const transfer = answer.transfer;
              state.transfers.set(transfer.id, transfer);
              if (file.image) state.fetchedImages.set(transfer.id, file.id);
              renderTransfers();
              if (transfer.state === 'complete') onFetched(transfer);
            } catch (error) { showError(error.message); }
          }, `Fetch ${file.name}`));
          return span;
        }

        function onFetched(transfer) {
          if (!transfer.path || !state.fetchedImages.has(transfer.id)) return;
          const fileId = state.fetchedImages.get(transfer.id);
          state.fetchedImages.delete(transfer.id);
          const item = [...$('messages').children].find((candidate) => candidate.dataset.fileId === fileId);
          if (item && !item.querySelector('img')) item.append(thumbnail(transfer));
        }

        async function refreshHistory() {
          if (!state.room) {
            $('messages').replaceChildren();
            return;
          }
          const answer = await call('history', { room: state.room, limit: state.limit, grep: state.search || undefined });
          const items = (answer.history || []).map(messageItem);
          if ((answer.history || []).length === state.limit && state.limit < 100000) {
            const earlier = el('li', null, 'system');
            earlier.append(button('Show earlier messages', async () => {
              state.limit = Math.min(state.limit * 4, 100000);
              try { await refreshHistory(); } catch (error) { showError(error.message); }
            }));
            items.unshift(earlier);
          }
          if (state.search && items.length === 0) items.push(el('li', `Nothing in ${state.room} matches “${state.search}”.`, 'system'));
          $('messages').replaceChildren(...items);
          if (!state.search) {
            for (const id of state.shownImages) if (state.transfers.has(id)) placeImage(state.transfers.get(id));
          }
          $('search-clear').hidden = !state.search;
          scrollToEnd();
          await refreshTopic();
        }

        // The room's topic and other metadata (`lanchat room list`), shown as text.
        async function refreshTopic() {
          if (!state.room) { $('room-meta').replaceChildren(); return; }
          const answer = await call('meta', { action: 'list', room: state.room });
          const entries = (answer.meta || []).filter((entry) => !entry.key.startsWith('admin.'));
          $('room-meta').replaceChildren(...entries.map((entry) => {
            const item = el('li');
            item.append(el('span', entry.key, 'sender'), el('span', entry.value || '', 'text'));
            return item;
          }));
          const topic = entries.find((entry) => entry.key === 'topic');
          if (document.activeElement !== $('topic')) $('topic').value = topic ? topic.value || '' : '';
        }
        """#
}
