// Server children: forked so that the load generator and each server run on
// their own event loops. Every child is killed when the run ends, on success,
// on error, or when the parent itself exits.
import { fork } from 'node:child_process'

const live = new Set()
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL')
})
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => process.exit(130))
}

const START_MS = 15000

/**
 * Starts `servers/<script>.js` (by default `<name>.js`); resolves to
 * { child, port, url } once it listens, or to an `error` string when it
 * cannot start.
 */
export function start(name, env = {}, execArgv = [], script = name) {
  const child = fork(new URL(`./servers/${script}.js`, import.meta.url), [], {
    env: { ...process.env, ...env },
    // `collect` runs a full collection (servers/child.js).
    execArgv: ['--expose-gc', ...execArgv],
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  })
  live.add(child)
  let stderr = ''
  child.stderr.on('data', (chunk) => {
    if (stderr.length < 4000) stderr += chunk
  })
  child.once('exit', () => live.delete(child))
  return new Promise((resolve) => {
    const fail = (why) => {
      clearTimeout(timer)
      child.kill('SIGKILL')
      resolve({ error: `${name}: ${why}${stderr ? `: ${firstLine(stderr)}` : ''}` })
    }
    const timer = setTimeout(() => fail('did not start in time'), START_MS)
    child.once('exit', (code) => fail(`exited with ${code}`))
    child.on('message', function ready(message) {
      if (message?.port === undefined) return
      clearTimeout(timer)
      child.removeAllListeners('exit')
      child.once('exit', () => live.delete(child))
      child.off('message', ready)
      resolve({ child, port: message.port, url: `http://127.0.0.1:${message.port}` })
    })
  })
}

function firstLine(text) {
  const line = text.split('\n').find((l) => /Error|error/.test(l)) ?? text.split('\n')[0]
  return line.trim().slice(0, 200)
}

/** Kills one child at once and resolves when it has exited: `--fresh` replaces a server between pairs. */
export function stop(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.once('exit', () => resolve())
    child.kill('SIGKILL')
  })
}

/** The child's resident set size, in bytes. */
export const rss = (child) => ask(child, 'memory')

/** The CPU time the child has used so far (user + system), in microseconds. */
export const cpu = (child) => ask(child, 'cpu')

/** The part of that CPU time spent in the kernel (system time: its system calls, the network stack), in microseconds. */
export const kernelCpu = (child) => ask(child, 'kernel')

/** The time the child has spent paused for garbage collection so far, in microseconds. */
export const gcPauses = (child) => ask(child, 'gc')

/**
 * Runs a full garbage collection in the child: what its live objects are then goes to the old generation, as
 * at a long-lived process's first mark-compact. Resolves to whether it could.
 */
export const collect = (child) => ask(child, 'collected', 'collect')

/** How many requests the child's server has received since it started. */
export const requests = (child) => ask(child, 'requests')

/** Starts the child's CPU profiler. */
export const startProfile = (child) => ask(child, 'profiling', { profile: 'start' })

/** Stops it and writes the profile to `file`; resolves to the number of requests it covers. */
export const stopProfile = (child, file) => ask(child, 'profiled', { profile: 'stop', file })

function ask(child, what, message = what) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(Number.NaN), 5000)
    child.on('message', function answer(message) {
      if (message?.[what] === undefined) return
      clearTimeout(timer)
      child.off('message', answer)
      resolve(message[what])
    })
    child.send(message)
  })
}

/** Asks every child to exit, then kills what is left. */
export async function stopAll(graceMs = 3000) {
  const waits = [...live].map(
    (child) =>
      new Promise((resolve) => {
        const timer = setTimeout(() => {
          child.kill('SIGKILL')
          resolve()
        }, graceMs)
        child.once('exit', () => {
          clearTimeout(timer)
          resolve()
        })
        if (child.connected) child.send('stop')
        else child.kill('SIGKILL')
      }),
  )
  await Promise.all(waits)
}
