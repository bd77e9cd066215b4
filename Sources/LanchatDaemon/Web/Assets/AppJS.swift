extension WebAssets {
    /// The page's script, an ES module. It speaks the control API's JSON over one WebSocket (the same
    /// calls and events as `lanchat`); everything that comes from peers goes into the page as text
    /// (`textContent`, attribute values), never as HTML.
    static let appJS = #"""
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

        function scrollToEnd() { $('messages').scrollTop = $('messages').scrollHeight; }

        function addMessage(message) {
          if (message.room !== state.room || state.search) return;
          const list = $('messages');
          for (const item of list.children) if (item.dataset.messageId === message.id) return;
          list.append(messageItem(message));
          scrollToEnd();
        }

        function imageURL(path) { return `/file?path=${encodeURIComponent(path)}&token=${encodeURIComponent(token)}`; }

        // Full size in the page, on a click (not in a tab of its own: its address, with the token, would
        // stay in the browser's history).
        function thumbnail(transfer) {
          const toggle = el('button', null, 'thumb-button');
          toggle.type = 'button';
          toggle.setAttribute('aria-expanded', 'false');
          toggle.setAttribute('aria-label', `${transfer.name}, from ${transfer.peer}: show full size`);
          const image = el('img', null, 'thumb');
          image.src = imageURL(transfer.path);
          image.alt = `${transfer.name}, from ${transfer.peer}`;
          image.addEventListener('error', () => toggle.remove());
          toggle.addEventListener('click', () => {
            toggle.setAttribute('aria-expanded', String(image.classList.toggle('full')));
          });
          toggle.append(image);
          return toggle;
        }

        function imageItem(transfer) {
          const item = el('li', null, 'file');
          item.dataset.transferId = transfer.id;
          item.append(el('span', transfer.peer, 'sender'), el('span', `sent ${transfer.name}`, 'text'), thumbnail(transfer));
          return item;
        }

        // Images received while the page is open join the conversation where they arrived (and stay
        // there when it is drawn again); every received image is also in the transfers list.
        function showImage(transfer) {
          // The same picture from another transfer (a shared file fetched by itself, then again) once.
          const key = `${transfer.name}/${transfer.size}`;
          if (state.shownImages.has(transfer.id) || state.shownKeys.has(key)) return;
          state.shownImages.add(transfer.id);
          state.shownKeys.add(key);
          if (state.search) return;
          placeImage(transfer);
          scrollToEnd();
        }

        function placeImage(transfer) {
          // A file shared in the room that this host fetched by itself: shown with its announcement.
          const key = `${transfer.name}/${transfer.size}`;
          const announced = [...$('messages').children].find((candidate) => candidate.dataset.fileKey === key);
          if (announced) {
            if (!announced.querySelector('img')) announced.append(thumbnail(transfer));
          } else {
            $('messages').append(imageItem(transfer));
          }
        }

        function isShownImage(transfer) {
          return transfer.direction === 'incoming' && transfer.state === 'complete' && transfer.path && imageName.test(transfer.name);
        }

        async function refreshTransfers() {
          const answer = await call('transfers');
          state.transfers = new Map((answer.transfers || []).map((transfer) => [transfer.id, transfer]));
          renderTransfers();
        }

        function renderTransfers() {
          $('transfers').replaceChildren(...[...state.transfers.values()].slice(-20).map((transfer) => {
            const item = el('li');
            item.dataset.transferId = transfer.id;
            const arrow = transfer.direction === 'incoming' ? '←' : '→';
            item.append(el('span', `${transfer.name} ${arrow} ${transfer.peer}`, 'name'), ' ');
            const progress = el('progress');
            progress.max = Math.max(transfer.size, 1);
            progress.value = transfer.done;
            progress.setAttribute('aria-label', `${transfer.name}: ${transfer.state}`);
            item.append(progress, ' ', el('span', transfer.state, 'meta'));
            if (transfer.error) item.append(' ', el('span', transfer.error, 'meta'));
            if (isShownImage(transfer)) item.append(thumbnail(transfer));
            if (!['complete', 'refused', 'failed', 'cancelled'].includes(transfer.state)) {
              item.append(' ', button('Cancel', async () => {
                try { await call('cancel', { id: transfer.id }); } catch (error) { showError(error.message); }
              }, `Cancel ${transfer.name}`));
            }
            return item;
          }));
        }

        let peersTimer = null;
        function onEvent(event) {
          switch (event.type) {
            case 'found': case 'changed': case 'lost':
              clearTimeout(peersTimer);
              peersTimer = setTimeout(() => refreshPeers().catch((error) => showError(error.message)), 200);
              break;
            case 'invitation': case 'invitation_closed':
              if (event.type === 'invitation' && window.Notification && Notification.permission === 'granted') {
                new Notification('lanchat invitation', { body: `${event.invitation.from} invites you to ${event.invitation.room}` });
              }
              refreshInvitations().catch((error) => showError(error.message));
              break;
            case 'meta':
              if (event.meta && event.meta.room === state.room) refreshTopic().catch((error) => showError(error.message));
              break;
            case 'member': case 'left': case 'presence':
              refreshRooms().then(() => event.type === 'presence' ? refreshPresence() : null).catch((error) => showError(error.message));
              break;
            case 'typing':
              if (event.member && event.member.room === state.room) {
                $('typing').textContent = `${event.member.name} is typing…`;
                clearTimeout(state.typingTimer);
                state.typingTimer = setTimeout(() => { $('typing').textContent = ''; }, 5000);
              }
              break;
            case 'message':
              if (!state.room) {
                refreshRooms().then(refreshHistory).catch((error) => showError(error.message));
              } else {
                addMessage(event.message);
              }
              break;
            case 'transfer':
              state.transfers.set(event.transfer.id, event.transfer);
              renderTransfers();
              if (isShownImage(event.transfer)) showImage(event.transfer);
              if (event.transfer.state === 'complete') onFetched(event.transfer);
              break;
            default:
              break;
          }
        }

        $('send-form').addEventListener('submit', async (submit) => {
          submit.preventDefault();
          const text = $('text').value;
          if (!text.trim() || !state.room) return;
          try {
            await call('send', { room: state.room, text });
            $('text').value = '';
            showError('');
            // The message's own event adds it too; this covers an event missed while reconnecting.
            const recent = await call('history', { room: state.room, limit: 5 });
            for (const message of recent.history || []) addMessage(message);
          } catch (error) { showError(error.message); }
        });

        $('text').addEventListener('input', () => {
          const now = Date.now();
          if (!state.room || now - state.lastTyping < 3000) return;
          state.lastTyping = now;
          call('typing', { room: state.room }).catch(() => {});
        });

        $('hand').addEventListener('click', async () => {
          if (!state.room) return;
          const up = !state.hands.includes(state.room);
          try {
            const answer = await call('hand', { up, room: state.room });
            state.hands = answer.presence.hands;
            updateHandButton();
          } catch (error) { showError(error.message); }
        });

        $('notify').addEventListener('click', async () => {
          if (!window.Notification) { showError('this browser has no notifications'); return; }
          const permission = await Notification.requestPermission();
          $('notify').textContent = permission === 'granted' ? 'Notifications on' : 'Notifications refused';
        });

        // A file goes to the daemon first (a temporary file in its state directory), then each
        // connected member of the room gets it with `send-file`, as `lanchat send-file --room` does.
        $('file').addEventListener('change', () => {
          const files = [...$('file').files];
          $('file').value = '';
          sendFiles(files);
        });

        const main = document.querySelector('main');
        main.addEventListener('dragover', (event) => {
          if (!event.dataTransfer || ![...event.dataTransfer.types].includes('Files')) return;
          event.preventDefault();
          main.classList.add('dropping');
        });
        main.addEventListener('dragleave', () => main.classList.remove('dropping'));
        main.addEventListener('drop', (event) => {
          event.preventDefault();
          main.classList.remove('dropping');
          if (event.dataTransfer) sendFiles([...event.dataTransfer.files]);
        });

        async function sendFiles(files) {
          const room = state.rooms.find((candidate) => candidate.room === state.room);
          const to = $('file-to').value;
          if (to === 'share') { await shareFiles(room, files); return; }
          const members = room ? room.members.filter((member) => member.state === 'connected' && (!to || member.id === to)) : [];
          if (members.length === 0) { showError('nobody connected in this room to send the file to'); return; }
          for (const file of files) {
            try {
              const upload = await uploadFile(file, members.length);
              await Promise.all(members.map((member, index) => call('send-file', {
                peer: member.id, path: upload.path, file_token: upload.file_tokens[index],
              })));
              showError('');
              await refreshTransfers();
            } catch (error) { showError(`${file.name}: ${error.message}`); }
          }
        }

        // Shared in the room (`share`): kept by this host and announced, for members now and later.
        async function shareFiles(room, files) {
          if (!room) { showError('no room to share the file in'); return; }
          for (const file of files) {
            try {
              const upload = await uploadFile(file, 1);
              await call('share', { room: room.room, path: upload.path, file_token: upload.file_tokens[0] });
              showError('');
              showNotice(`shared ${file.name} in ${room.room}`);
            } catch (error) { showError(`${file.name}: ${error.message}`); }
          }
        }

        async function uploadFile(file, count) {
          const response = await fetch(`/upload?name=${encodeURIComponent(file.name)}&count=${count}`, {
            method: 'POST', body: file, headers: { 'X-Lanchat-Token': token }, cache: 'no-store',
          });
          if (!response.ok) throw new Error(await response.text());
          return response.json();
        }

        $('presence-form').addEventListener('submit', async (submit) => {
          submit.preventDefault();
          try {
            const answer = await call('presence', { availability: $('availability').value, text: $('status-text').value });
            state.hands = answer.presence.hands;
            showError('');
          } catch (error) { showError(error.message); }
        });

        $('invite-form').addEventListener('submit', async (submit) => {
          submit.preventDefault();
          if (!$('invite-peer').value) { showError('no peer to invite'); return; }
          try {
            const answer = await call('invite', {
              peer: $('invite-peer').value, room: $('invite-room').value, message: $('invite-message').value || undefined,
            });
            $('invite-message').value = '';
            showError('');
            showNotice(`invited ${answer.invite.peer} to ${answer.invite.room}: ${answer.invite.outcome}`);
          } catch (error) { showError(error.message); }
        });

        $('topic-form').addEventListener('submit', async (submit) => {
          submit.preventDefault();
          if (!state.room) return;
          try {
            await call('meta', { action: 'set', room: state.room, key: 'topic', value: $('topic').value });
            showError('');
            await refreshTopic();
          } catch (error) { showError(error.message); }
        });

        $('search-form').addEventListener('submit', async (submit) => {
          submit.preventDefault();
          state.search = $('search').value.trim();
          try { await refreshHistory(); } catch (error) { showError(error.message); }
        });

        $('search-clear').addEventListener('click', async () => {
          state.search = '';
          $('search').value = '';
          try { await refreshHistory(); } catch (error) { showError(error.message); }
        });

        connect();
        """#
}
