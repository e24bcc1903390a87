// Runs the seed's OSC 7501 code (program-status.mjs, issue 29) on cases read from stdin, one JSON object a line,
// and answers each with one JSON line on stdout. One process serves a whole test run.
//
//   {"encode": REPORT}                                      -> {"seq": "<sequence>" | null}
//   {"probe": true}                                         -> {"seq": "<the support query, then DA1>"}
//   {"emit": {"app"?, "tmux"?, "throttleMs"?}, "steps": [{"t": MS, "report"?: REPORT}, ...]}
//                                                           -> {"writes": [{"t": MS, "seq": "<sequence>"}, ...]}
//
// An emitter case runs on a fake clock: each step first moves the clock to `t` (firing, in order, every timer due
// by then, each at its own time) and then hands the emitter its report, if any. The emitter is in mode `on`.
// Usage: node program_status_seed.mjs /path/to/program-status.mjs
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const seed = await import(pathToFileURL(process.argv[2]).href);

function fakeTimers() {
  let now = 0;
  let order = 0;
  const pending = new Set();
  return {
    now: () => now,
    setTimeout(fn, delay) {
      const timer = { due: now + delay, order: order++, fn };
      pending.add(timer);
      return timer;
    },
    clearTimeout(timer) {
      pending.delete(timer);
    },
    moveTo(t) {
      for (;;) {
        let next;
        for (const timer of pending)
          if (timer.due <= t && (next === undefined || timer.due < next.due || (timer.due === next.due && timer.order < next.order)))
            next = timer;
        if (next === undefined) break;
        pending.delete(next);
        now = Math.max(now, next.due);
        next.fn();
      }
      now = Math.max(now, t);
    },
  };
}

function emit(options, steps) {
  const clock = fakeTimers();
  const realSet = globalThis.setTimeout;
  const realClear = globalThis.clearTimeout;
  globalThis.setTimeout = clock.setTimeout;
  globalThis.clearTimeout = clock.clearTimeout;
  const writes = [];
  try {
    const emitter = new seed.ProgramStatusEmitter({
      mode: "on",
      env: options.tmux ? { TMUX: "/tmp/tmux-1/default,1,0" } : {},
      app: options.app,
      throttleMs: options.throttleMs,
      now: clock.now,
      write: (seq) => writes.push({ t: clock.now(), seq }),
    });
    emitter.start();
    for (const step of steps) {
      clock.moveTo(step.t);
      if (step.report !== undefined) emitter.report(step.report);
    }
    emitter.dispose();
  } finally {
    globalThis.setTimeout = realSet;
    globalThis.clearTimeout = realClear;
  }
  return { writes };
}

function answer(line) {
  const c = JSON.parse(line);
  if (c.encode !== undefined) return { seq: seed.encodeProgramStatus(c.encode) ?? null };
  if (c.probe !== undefined) return { seq: seed.PROGRAM_STATUS_QUERY + seed.DA1_QUERY };
  if (c.emit !== undefined) return emit(c.emit, c.steps);
  return { error: "unknown case" };
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  let out;
  try {
    out = answer(line);
  } catch (e) {
    out = { error: String(e) };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}
