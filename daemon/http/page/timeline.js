"use strict";
// The job's timeline on rdzvd's status page (docs/OPERATIONS.md, "The
// timeline"), embedded in rdzvd and served at /timeline.js: time across,
// one lane per node (or per group of nodes when they do not fit), the
// generations as bands, restarts, losses and failures as marks whose
// <title> (the hover text) holds the event's message. It is drawn from the
// job's events: the whole history from /api/events once, then the latest
// ones that each update of /events carries. Every string a client sent
// (host names, reasons) goes into the SVG as textContent only.
//
// Events name nodes in their messages ("node HOST (node ID) ..."), and a
// round's event says how many nodes it has, not which: the members are
// those the ranks event names, then the round's earlier members, then the
// nodes that joined, waited and stood by, in that order (SPEC rule 2), and
// the nodes' current states correct the current generation.
(function () {
	var SVG = "http://www.w3.org/2000/svg";
	var MAX_LANES = 40;	// beyond this, nodes are grouped
	var LABEL_W = 200, STEP_W = 80, AXIS_H = 20, BAND_H = 22;
	var LANE_H = 14, LANE_GAP = 3;
	var LIVE = ["waiting", "joined", "spare", "running"];	// priority
	var ENDED = ["quarantined", "evicted", "lost", "failed", "left",
	    "succeeded"];
	var JOINED_AS = { participant: "joined", waiting: "waiting",
	    spare: "spare" };
	var NODE_MARKS = { lost: 1, left: 1, evicted: 1, failure: 1, hang: 1,
	    host: 1 };
	var JOB_MARKS = { failed: 1, closed: 1, closing: 1, reopened: 1,
	    held: 1, refused: 1 };

	// The history of the job shown: its events by seq, and the training
	// steps its nodes reported while the page watched.
	var hist = null;

	function reset(id) {
		hist = { id: id, events: [], last: 0, complete: false,
		    loading: false, failed: "", steps: new Map(), box: null,
		    job: null, now: 0, ready: false };
	}

	function svg(tag, attrs, text) {
		var e = document.createElementNS(SVG, tag);
		for (var k in attrs)
			e.setAttribute(k, attrs[k]);
		if (text !== undefined)
			e.textContent = String(text);
		return e;
	}

	function title(parent, text) {
		parent.appendChild(svg("title", {}, text));
		return parent;
	}

	// Pages through /api/events from the last seq held.
	function load() {
		var h = hist;
		if (h.loading)
			return;
		h.loading = true;
		fetch("api/events?job=" + encodeURIComponent(h.id) + "&after=" +
		    h.last, { cache: "no-store" }).then(function (r) {
			return r.json().then(function (d) {
				if (!r.ok)
					throw new Error(d.error || r.statusText);
				return d;
			});
		}).then(function (d) {
			if (hist !== h)
				return;
			d.events.forEach(add);
			h.loading = false;
			if (d.more && d.events.length > 0)
				return load();
			h.complete = true;
			h.failed = "";
			if (h.job !== null)
				merge(h.job);
			draw();
		}).catch(function (e) {
			if (hist !== h)
				return;
			h.loading = false;
			h.failed = "the job's history could not be read (" +
			    e.message + "); showing its latest events";
			h.complete = true;
			if (h.job !== null)
				merge(h.job);
			draw();
		});
	}

	function add(e) {
		if (e.seq <= hist.last)
			return;
		hist.events.push(e);
		hist.last = e.seq;
	}

	// The latest events an update carries; a gap since the last one held
	// (more happened between two updates than an update carries) is read
	// from /api/events instead, the timeline drawn as it was meanwhile.
	// While a read is under way nothing is added: it reads on from the
	// last seq held, and the update after it adds what came since.
	function merge(j) {
		if (hist.loading)
			return;
		var evs = j.events.slice().sort(function (a, b) {
			return a.seq - b.seq;
		});
		if (evs.length > 0 && evs[0].seq > hist.last + 1 &&
		    hist.failed === "") {
			load();
			return;
		}
		evs.forEach(add);
	}

	function sample(j, now) {
		j.nodes.forEach(function (n) {
			if (!n.has_step)
				return;
			var id = String(n.node_id), s = hist.steps.get(id);
			if (s === undefined)
				hist.steps.set(id, s = []);
			if (s.length === 0 || s[s.length - 1][1] !== +n.step)
				s.push([now, +n.step]);
		});
	}

	// ---- the model: lanes of [time, state] and marks, generations

	function nodeOf(msg) {
		var m = /^node (.*?) \(node (\d+)\)/.exec(msg);
		return m ? { host: m[1], id: m[2] } : null;
	}

	function build(events, j, now) {
		var nodes = new Map(), bands = [], jobMarks = [], hostQ = {};
		var pending = [], cause = "", restarts = 0, order = 0;

		function node(p, t) {
			var n = nodes.get(p.id);
			if (n === undefined)
				nodes.set(p.id, n = { id: p.id, host: p.host,
				    segs: [], marks: [], order: order++,
				    first: t });
			return n;
		}
		function state(n) {
			return n.segs.length ? n.segs[n.segs.length - 1][1] : "";
		}
		function set(n, t, s) {
			if (state(n) !== s)
				n.segs.push([t, s]);
		}
		function live(n) {
			return LIVE.indexOf(state(n)) >= 0;
		}
		// A member's end or failure stops the round: every member
		// waits for the next one.
		function interrupted(n, t) {
			if (state(n) !== "running")
				return;
			nodes.forEach(function (o) {
				if (state(o) === "running")
					set(o, t, "waiting");
			});
		}

		events.forEach(function (e) {
			var t = e.time_unix_ms, k = e.kind, msg = e.message, p, n, m;
			if (k === "join" && (p = nodeOf(msg)) !== null) {
				n = node(p, t);
				m = / joined as (\w+)/.exec(msg);
				if (m && JOINED_AS[m[1]])
					set(n, t, JOINED_AS[m[1]]);
			} else if (k === "ranks") {
				var re = /\(node (\d+)\) takes group rank/g;
				while ((m = re.exec(msg)) !== null)
					pending.push(m[1]);
			} else if (k === "round") {
				m = /^generation (\d+): (\d+) nodes?, world size (\d+).*restart (\d+) of max/.exec(msg);
				if (!m)
					return;
				var gen = +m[1], size = +m[2], r = +m[4];
				if (bands.length)
					bands[bands.length - 1].end = t;
				bands.push({ gen: gen, nodes: size, world: +m[3],
				    restart: r, start: t, end: null, msg: msg,
				    cause: bands.length === 0 ? "" : cause ||
				    (r > restarts ? "a failure" : "a change of nodes") });
				restarts = r;
				var rank = function (x) {
					var i = pending.indexOf(x.id);
					return i >= 0 ? i : 1000 + ["running",
					    "waiting", "joined", "spare"].indexOf(
					    state(x)) * 1e7 + x.order;
				};
				var l = Array.from(nodes.values()).filter(live);
				l.sort(function (a, b) { return rank(a) - rank(b); });
				l.forEach(function (x, i) {
					set(x, t, i < size ? "running" : "spare");
				});
				pending = [];
				cause = "";
			} else if (NODE_MARKS[k] && (p = nodeOf(msg)) !== null) {
				n = node(p, t);
				n.marks.push({ t: t, kind: k, msg: msg });
				// What ends or fails a member is the next
				// restart's cause; a spare's end is not.
				if (state(n) === "running" && k !== "host")
					cause = msg;
				if (k === "lost" || k === "left" || k === "evicted") {
					interrupted(n, t);
					// A quarantine's eviction names the host.
					set(n, t, k === "evicted" && (hostQ[n.host] ||
					    /^node .*? \(node \d+\) evicted: host .* quarantined: /
					    .test(msg)) ? "quarantined" : k);
				} else if (k === "failure" || k === "hang")
					interrupted(n, t);
			} else if (k === "host") {
				m = /^host (.*) (ok|suspect|quarantined): /.exec(msg);
				if (!m)
					return;
				hostQ[m[1]] = m[2] === "quarantined";
				nodes.forEach(function (x) {
					if (x.host === m[1] && live(x))
						x.marks.push({ t: t, kind: "host",
						    msg: msg });
				});
			} else if (k === "succeeded" && (p = nodeOf(msg)) !== null) {
				set(node(p, t), t, "succeeded");
			} else if (JOB_MARKS[k]) {
				jobMarks.push({ t: t, kind: k, msg: msg });
				if (k === "failed")
					nodes.forEach(function (x) {
						if (live(x))
							set(x, t, "failed");
					});
			}
		});

		// The nodes as they are now: those whose joins the history no
		// longer holds, and the current round as it was really formed.
		var cur = { participant: "running", waiting: "waiting",
		    spare: "spare", succeeded: "succeeded", left: "left",
		    lost: "lost", evicted: "evicted", failed: "failed" };
		j.nodes.forEach(function (x) {
			var id = String(x.node_id), n = nodes.get(id);
			var s = cur[x.state];
			if (s === "running" && x.group_rank < 0)
				s = "joined";
			if (s === undefined)
				return;
			if (n === undefined) {
				var t = x.joined_unix_ms || now;
				n = node({ id: id, host: x.hostname }, t);
				set(n, t, s);
			} else if (LIVE.indexOf(s) >= 0 && live(n) &&
			    state(n) !== s)
				n.segs[n.segs.length - 1][1] = s;
		});
		if (bands.length)
			bands[bands.length - 1].end = now;
		var list = Array.from(nodes.values()).sort(function (a, b) {
			return a.id - b.id;
		});
		return { nodes: list, bands: bands, jobMarks: jobMarks };
	}

	// ---- lanes: one per node, or groups of node ranges

	function groups(list) {
		if (list.length <= MAX_LANES)
			return list.map(function (n) {
				return { key: "node-" + n.id, label: n.host,
				    what: "node " + n.id + " on " + n.host,
				    nodes: [n] };
			});
		var size = Math.ceil(list.length / MAX_LANES), out = [];
		for (var i = 0; i < list.length; i += size) {
			var part = list.slice(i, i + size);
			var a = part[0].id, b = part[part.length - 1].id;
			out.push({ key: "nodes-" + a + "-" + b, label: "nodes " +
			    a + "–" + b + " (" + part.length + ")", what:
			    part.length + " nodes, ids " + a + " to " + b,
			    nodes: part });
		}
		return out;
	}

	// A group's state over time: its most telling live state (waiting
	// before spare before running), or when none is live, its members'
	// most serious end. A sweep over every change of its members.
	function lanesegs(g) {
		if (g.nodes.length === 1)
			return g.nodes[0].segs;
		var ch = [], count = {}, now = {}, out = [];
		g.nodes.forEach(function (n, i) {
			n.segs.forEach(function (s) { ch.push([s[0], i, s[1]]); });
		});
		ch.sort(function (a, b) { return a[0] - b[0]; });
		for (var i = 0; i < ch.length; i++) {
			var c = ch[i];
			if (now[c[1]] !== undefined)
				count[now[c[1]]]--;
			now[c[1]] = c[2];
			count[c[2]] = (count[c[2]] || 0) + 1;
			if (i + 1 < ch.length && ch[i + 1][0] === c[0])
				continue;
			var s = LIVE.concat(ENDED).find(function (x) {
				return count[x] > 0;
			});
			if (out.length === 0 || out[out.length - 1][1] !== s)
				out.push([c[0], s]);
		}
		return out;
	}

	// ---- drawing

	function ticks(t0, t1, width) {
		var steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800,
		    3600, 7200, 21600, 43200, 86400, 604800];
		var span = (t1 - t0) / 1000, step = steps[steps.length - 1];
		for (var i = 0; i < steps.length; i++)
			if (span / steps[i] <= Math.max(2, width / 110)) {
				step = steps[i];
				break;
			}
		var out = [], ms = step * 1000;
		for (var t = Math.ceil(t0 / ms) * ms; t <= t1; t += ms)
			out.push(t);
		return out;
	}

	function clock(t) {
		var d = new Date(t);
		return [d.getHours(), d.getMinutes(), d.getSeconds()].map(
		    function (x) { return (x < 10 ? "0" : "") + x; }).join(":");
	}

	function when(t, t0) {
		return clock(t) + " (+" + Math.round((t - t0) / 100) / 10 + " s)";
	}

	var SYMBOL = { lost: "M-4,-5L4,5M4,-5L-4,5", evicted:
	    "M-4,-5L4,5M4,-5L-4,5", failure: "M0,-6L5,5L-5,5Z", hang:
	    "M0,-6L5,5L-5,5Z", left: "M-4,0L4,0", host: "M-4,-4H4V4H-4Z" };

	// Marks closer than 4 px are one mark whose hover text holds them all.
	function marksOf(nodes, x) {
		var all = [];
		nodes.forEach(function (n) { all = all.concat(n.marks); });
		all.sort(function (a, b) { return a.t - b.t; });
		var out = [];
		all.forEach(function (m) {
			var px = x(m.t), last = out[out.length - 1];
			if (last && last.kind === m.kind && px - last.px < 4) {
				if (last.msgs.length < 12)
					last.msgs.push(m.msg);
				last.n++;
			} else
				out.push({ px: px, kind: m.kind, msgs: [m.msg],
				    n: 1 });
		});
		return out;
	}

	function draw() {
		var h = hist, box = h.box;
		if (box === null || !box.isConnected || h.job === null)
			return;
		var t0p = performance.now();
		box.replaceChildren();
		if (!h.complete) {
			box.appendChild(Object.assign(document.createElement("p"),
			    { className: "muted", textContent:
			    "Reading the job's history…" }));
			return;
		}
		var j = h.job, now = h.now;
		var ended = ["succeeded", "failed", "closed"].indexOf(j.state) >= 0;
		var evs = h.events;
		var t0 = evs.length ? Math.min(evs[0].time_unix_ms,
		    +j.created_unix_ms || Infinity) : +j.created_unix_ms;
		var t1 = ended && evs.length ? evs[evs.length - 1].time_unix_ms :
		    now;
		t1 = Math.max(t1, t0 + 1000);
		var model = build(evs, j, t1);
		var lanes = groups(model.nodes);
		var width = Math.max(640, box.clientWidth || 1000);
		var plotW = width - LABEL_W - STEP_W;
		var x = function (t) {
			return LABEL_W + Math.max(0, Math.min(1, (t - t0) /
			    (t1 - t0))) * plotW;
		};
		var top = AXIS_H + BAND_H + 4;
		var height = top + lanes.length * (LANE_H + LANE_GAP) + 4;
		var root = svg("svg", { class: "timeline", width: width,
		    height: height, viewBox: "0 0 " + width + " " + height,
		    "data-nodes": model.nodes.length, "data-lanes": lanes.length,
		    "data-grouped": lanes.length < model.nodes.length ? 1 : 0 });

		ticks(t0, t1, plotW).forEach(function (t) {
			root.appendChild(svg("line", { class: "tick", x1: x(t),
			    x2: x(t), y1: AXIS_H - 4, y2: height }));
			root.appendChild(svg("text", { class: "axis", x: x(t),
			    y: AXIS_H - 7, "text-anchor": "middle" }, clock(t)));
		});
		model.bands.forEach(function (b, i) {
			var g = svg("g", { class: "band", "data-generation": b.gen,
			    "data-world": b.world, "data-nodes": b.nodes,
			    "data-restart": b.restart });
			var x0 = x(b.start), w = Math.max(1, x(b.end) - x0);
			g.appendChild(svg("rect", { class: "band-bg b" + (i % 2),
			    x: x0, y: AXIS_H, width: w, height: height - AXIS_H }));
			g.appendChild(svg("rect", { class: "band-head b" + (i % 2),
			    x: x0, y: AXIS_H, width: w, height: BAND_H }));
			// The longest label that fits the band (about 7 px a
			// character), none in a band too narrow for a number.
			var fit = ["gen " + b.gen + " · world " + b.world, "gen " +
			    b.gen, String(b.gen)].find(function (s) {
				return s.length * 7 + 12 < w;
			});
			if (fit !== undefined)
				g.appendChild(svg("text", { x: x0 + 4, y: AXIS_H + 15,
				    class: "band-label" }, fit));
			title(g, b.msg + "\nfrom " + when(b.start, t0) + " to " +
			    when(b.end, t0));
			root.appendChild(g);
			if (b.cause !== "") {
				var r = svg("g", { class: "mark m-restart",
				    "data-kind": "restart", "data-generation": b.gen,
				    transform: "translate(" + x0 + "," + (AXIS_H +
				    BAND_H / 2) + ")" });
				r.appendChild(svg("path", { d: "M0,-7L6,0L0,7Z" }));
				title(r, "restart into generation " + b.gen + " at " +
				    when(b.start, t0) + " (restarts counted: " +
				    b.restart + "), after: " + b.cause);
				root.appendChild(r);
			}
		});
		model.jobMarks.forEach(function (m) {
			var g = svg("g", { class: "mark m-job", "data-kind": m.kind,
			    transform: "translate(" + x(m.t) + "," + (AXIS_H +
			    BAND_H / 2) + ")" });
			g.appendChild(svg("circle", { r: 4 }));
			title(g, m.kind + " at " + when(m.t, t0) + ": " + m.msg);
			root.appendChild(g);
		});

		lanes.forEach(function (l, i) {
			var y = top + i * (LANE_H + LANE_GAP);
			var segs = lanesegs(l);
			var g = svg("g", { class: "lane", "data-lane": l.key,
			    "data-states": segs.map(function (s) { return s[1]; })
			    .join(" ") });
			if (l.nodes.length === 1)
				g.setAttribute("data-node", l.nodes[0].id);
			var label = svg("text", { class: "lane-label", x: LABEL_W - 6,
			    y: y + LANE_H - 3, "text-anchor": "end" },
			    l.label.length > 28 ? l.label.slice(0, 27) + "…" :
			    l.label);
			var counts = {};
			l.nodes.forEach(function (n) {
				var s = n.segs.length ? n.segs[n.segs.length - 1][1] :
				    "";
				counts[s] = (counts[s] || 0) + 1;
			});
			title(label, l.what + ": " + Object.keys(counts).map(
			    function (s) { return counts[s] + " " + s; }).join(", "));
			g.appendChild(label);
			segs.forEach(function (s, k) {
				var end = k + 1 < segs.length ? segs[k + 1][0] : t1;
				var done = ENDED.indexOf(s[1]) >= 0;
				var r = svg("rect", { class: "seg tl-" + s[1] +
				    (done ? " ended" : ""), "data-state": s[1],
				    x: x(s[0]), y: done ? y + LANE_H / 3 : y,
				    width: Math.max(1, x(end) - x(s[0])),
				    height: done ? LANE_H / 3 : LANE_H });
				title(r, s[1] + " from " + when(s[0], t0) + " to " +
				    when(end, t0));
				g.appendChild(r);
			});
			marksOf(l.nodes, x).forEach(function (m) {
				var mk = svg("g", { class: "mark m-" + m.kind,
				    "data-kind": m.kind, transform: "translate(" +
				    m.px + "," + (y + LANE_H / 2) + ")" });
				mk.appendChild(svg("path", { d: SYMBOL[m.kind] }));
				title(mk, m.msgs.join("\n") + (m.n > m.msgs.length ?
				    "\nand " + (m.n - m.msgs.length) + " more" : ""));
				g.appendChild(mk);
			});
			stepsOf(l, g, x, y);
			root.appendChild(g);
		});
		if (h.failed !== "")
			box.appendChild(Object.assign(document.createElement("p"),
			    { className: "muted", textContent: h.failed }));
		var wrap = document.createElement("div");
		wrap.className = "scroll";
		wrap.appendChild(root);
		box.appendChild(wrap);
		box.appendChild(legend());
		box.dataset.drawMs = (performance.now() - t0p).toFixed(1);
		if (!h.ready) {
			// When the page first showed the whole story: the
			// render time the tests print (docs/OPERATIONS.md).
			h.ready = true;
			box.dataset.readyMs = performance.now().toFixed(0);
		}
		box.dataset.ready = "1";
	}

	var KEYS = [["joined", "joined, the round not formed yet"],
	    ["waiting", "waiting for a round"], ["running", "in the round"],
	    ["spare", "spare"], ["lost", "lost"], ["left", "left"],
	    ["evicted", "evicted"], ["quarantined", "evicted: host quarantined"],
	    ["succeeded", "succeeded"], ["failed", "failed with the job"]];

	function legend() {
		var p = document.createElement("p");
		p.className = "legend";
		KEYS.forEach(function (k) {
			var s = document.createElement("span"), i = document.createElement("i");
			i.className = "tl-" + k[0];
			s.appendChild(i);
			s.appendChild(document.createTextNode(k[1]));
			p.appendChild(s);
		});
		p.appendChild(document.createTextNode("Marks: ▶ restart, ✕ lost or " +
		    "evicted, ▲ failure or hang, ■ host state, ― left, ● job " +
		    "event, | step; hover for the reasons."));
		return p;
	}

	// The training steps the lane's nodes reported while the page was
	// open: a tick where the (slowest) step changed, and the latest step.
	function stepsOf(l, g, x, y) {
		var samples = [];
		l.nodes.forEach(function (n) {
			(hist.steps.get(n.id) || []).forEach(function (s) {
				samples.push([s[0], s[1], n.id]);
			});
		});
		// A lane whose nodes all ended trains no more.
		if (samples.length === 0 || l.nodes.every(function (n) {
			return ENDED.indexOf(n.segs.length ?
			    n.segs[n.segs.length - 1][1] : "") >= 0;
		}))
			return;
		samples.sort(function (a, b) { return a[0] - b[0]; });
		var cur = {}, last = -1, lastPx = -10, low = 0;
		samples.forEach(function (s) {
			cur[s[2]] = s[1];
			low = Math.min.apply(null, Object.values(cur));
			if (low === last || x(s[0]) - lastPx < 6)
				return;
			var tk = svg("line", { class: "step", x1: x(s[0]), x2: x(s[0]),
			    y1: y, y2: y + LANE_H, "data-step": low });
			title(tk, "step " + low + " at " + clock(s[0]));
			g.appendChild(tk);
			last = low;
			lastPx = x(s[0]);
		});
		g.appendChild(svg("text", { class: "step-label", x: x(Infinity) +
		    6, y: y + LANE_H - 3 }, "step " + low));
	}

	// The right edge is now: it moves on while no update comes.
	setInterval(function () {
		if (hist !== null && hist.job !== null && hist.complete &&
		    ["succeeded", "failed", "closed"].indexOf(hist.job.state) < 0) {
			hist.now = Date.now() + (window.skew || 0);
			draw();
		}
	}, 5000);

	// Called by the page on every update of the job it shows.
	window.rdzvTimeline = function (box, j, now) {
		if (hist === null || hist.id !== j.rdzv_id) {
			reset(j.rdzv_id);
			load();
		}
		hist.box = box;
		hist.job = j;
		hist.now = now;
		sample(j, now);
		if (hist.complete)
			merge(j);
		draw();
	};

	// The page names the job it is about to follow: its history is read
	// meanwhile, not after the job's first answer came.
	window.rdzvTimeline.prefetch = function (id) {
		if (hist !== null && hist.id === id)
			return;
		reset(id);
		load();
	};
})();
