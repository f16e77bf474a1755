import { spawn } from 'node:child_process'
import { PassThrough } from 'node:stream'
import t from 'tap'
import { main } from '../../lib/cli/main.js'
import { verifyPassword } from '../../lib/credentials/hash.js'
import { runCli } from '../helpers/cli.js'

const STRONG = 'correct horse battery staple'

t.test('prints a scrypt hash of the password on stdin, without its trailing newline', async (t) => {
  const result = await runCli(['hash-password'], `${STRONG}\n`)
  t.equal(result.code, 0)
  t.equal(result.stderr, '', 'no warning for a long password')
  t.match(result.stdout, /^scrypt\$16384\$8\$1\$[A-Za-z0-9+/]+=*\$[A-Za-z0-9+/]+=*\n$/)
  const hash = result.stdout.trimEnd()
  t.ok(await verifyPassword(STRONG, hash))
  t.notOk(await verifyPassword(`${STRONG}\n`, hash))
})

t.test('only one trailing newline is stripped: a second is part of the password, and refused', async (t) => {
  const result = await runCli(['hash-password'], `${STRONG}\n\n`)
  t.equal(result.code, 2)
  t.match(result.stderr, /holds a control character/)
  t.ok(await verifyPassword(STRONG, (await runCli(['hash-password'], `${STRONG}\n`)).stdout.trimEnd()))
  const crlf = await runCli(['hash-password'], `${STRONG}\r\n`)
  t.ok(await verifyPassword(STRONG, crlf.stdout.trimEnd()))
})

t.test('a password under 12 characters is hashed, with a warning on stderr (PCI DSS 8.6.3)', async (t) => {
  for (const [password, length] of [
    ['x', 1],
    ['elevenchars', 11],
    ['🔑🔑🔑🔑🔑🔑🔑🔑🔑🔑🔑', 11],
  ] as const) {
    const result = await runCli(['hash-password'], password)
    t.equal(result.code, 0)
    t.ok(await verifyPassword(password, result.stdout.trimEnd()), 'still hashed')
    t.equal(
      result.stderr,
      `payments-gate hash-password: warning: the password has ${length} characters; one that a system uses should have at least 12, random (PCI DSS v4.0 8.6.3, docs/credentials.md): openssl rand -base64 24 makes one\n`,
    )
    t.notMatch(result.stderr, password, 'the password is not shown')
  }
  t.equal((await runCli(['hash-password'], 'twelve chars')).stderr, '', '12 characters: no warning')
})

t.test('an empty password, a password that is not UTF-8, or an argument is refused with exit 2', async (t) => {
  for (const [args, stdin, message] of [
    [[], '', /the password is empty/],
    [[], '\n', /the password is empty/],
    [[], Buffer.from([0x70, 0xff]), /not UTF-8/],
    [[], Buffer.alloc(65537, 0x61), /the password on stdin is longer than 65536 bytes/],
    // Red before: hashed, though no BasicAuth header could ever carry it.
    [[], 'abcdefghijklmnop\t', /holds a control character/],
    [[], 'abcdefghijklmnop\n\n', /holds a control character/],
    [[], 'abcd\u0000efghijklmnop', /holds a control character/],
    [['secret'], 'x', /too many arguments; usage: payments-gate hash-password < password/],
    [['--password', 'secret'], 'x', /this command takes no flags; see payments-gate hash-password --help/],
    // Red before: "unknown flag --secret", the password typed as a flag shown on stderr.
    [['--secret'], 'x', /takes no flags/],
    [['--secret=x'], 'x', /takes no flags/],
    [['-secret'], 'x', /takes no flags/],
  ] as const) {
    const result = await runCli(['hash-password', ...args], stdin)
    t.equal(result.code, 2)
    t.equal(result.stdout, '')
    t.match(result.stderr, message)
    t.match(result.stderr, /^payments-gate hash-password: [^\n]*\n$/)
    t.notMatch(result.stderr, /secret/, 'an argument is never echoed: it may be a password')
  }
})

/** A terminal as node gives it to a command (isTTY, setRawMode), its keys typed after each prompt. */
class Terminal extends PassThrough {
  readonly isTTY = true
  readonly modes: boolean[] = []
  setRawMode(mode: boolean): this {
    this.modes.push(mode)
    return this
  }
}

/** hash-password on a terminal: each entry of `keys` typed once the next prompt shows. */
async function onTerminal(keys: string[], end = false) {
  const stdin = new Terminal()
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  let out = ''
  let err = ''
  stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
  stderr.on('data', (chunk: Buffer) => {
    err += chunk.toString()
    if (!/: $/.test(err)) return
    const next = keys.shift()
    // A key at a time, as typed.
    if (next !== undefined) for (const key of next) stdin.write(key)
    else if (end) stdin.end()
  })
  const code = await main(['hash-password'], { stdin, stdout, stderr, env: {} })
  return { code, stdout: out, stderr: err, modes: stdin.modes }
}

t.test('on a terminal: asked twice on stderr, echo off, the mode restored', async (t) => {
  const result = await onTerminal([`${STRONG}\r`, `${STRONG.slice(0, -1)}x\u007fe\r`])
  t.equal(result.code, 0)
  t.equal(result.stderr, 'Password (not shown): \nThe same again: \n', 'the prompts on stderr, nothing typed shown')
  t.ok(await verifyPassword(STRONG, result.stdout.trimEnd()))
  t.same(result.modes, [true, false, true, false], 'raw mode (no echo) while each line is typed, then restored')
})

t.test('on a terminal: two different passwords, Ctrl-C, an empty line or a hang-up hash nothing', async (t) => {
  for (const [keys, end, message] of [
    [[`${STRONG}\r`, 'something else\r'], false, 'the two passwords differ; nothing was hashed, run it again'],
    [['corr\u0003'], false, 'cancelled (Ctrl-C); nothing was hashed'],
    [[`${STRONG}\r`, '\u0003'], false, 'cancelled (Ctrl-C); nothing was hashed'],
    [['\r'], false, /: the password is empty; type it when asked/],
    [['\u0004'], false, /: the password is empty/],
    [[], true, /: the password is empty/],
  ] as const) {
    const result = await onTerminal([...keys], end)
    t.equal(result.code, 2)
    t.equal(result.stdout, '')
    t.match(result.stderr.split('\n').at(-2), message)
    t.equal(result.modes.at(-1), false, 'the terminal is left as it was found')
  }
})

t.test('on a real pseudo-terminal (script from util-linux): nothing typed is echoed', async (t) => {
  const hook = new URL('../typescript.mjs', import.meta.url).href
  const command = `'${process.execPath}' --import='${hook}' lib/cli.ts hash-password`
  const child = spawn('script', ['-qefc', command, '/dev/null'], { stdio: ['pipe', 'pipe', 'pipe'] })
  child.on('error', () => {})
  t.teardown(() => void child.kill('SIGKILL'))
  let seen = ''
  const shown = (pattern: RegExp) =>
    new Promise<void>((resolve) => {
      const check = () => pattern.test(seen) && (child.stdout.off('data', check), resolve())
      child.stdout.on('data', (chunk: Buffer) => {
        seen += chunk.toString()
        check()
      })
      check()
    })
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve))
  await shown(/Password \(not shown\): $/)
  child.stdin.write(`${STRONG}\r`)
  await shown(/The same again: $/)
  child.stdin.write(`${STRONG}\r`)
  t.equal(await exited, 0)
  t.notMatch(seen, /correct|horse/, 'the password never echoed')
  const hash = /scrypt\$[^\s]+/.exec(seen)?.[0] ?? ''
  t.ok(await verifyPassword(STRONG, hash), 'the hash printed is of the typed password')
})
