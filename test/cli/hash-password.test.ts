import t from 'tap'
import { verifyPassword } from '../../lib/credentials/hash.js'
import { runCli } from '../helpers/cli.js'

t.test('prints a scrypt hash of the password on stdin, without its trailing newline', async (t) => {
  const result = await runCli(['hash-password'], 'correct horse\n')
  t.equal(result.code, 0)
  t.match(result.stdout, /^scrypt\$16384\$8\$1\$[A-Za-z0-9+/]+=*\$[A-Za-z0-9+/]+=*\n$/)
  const hash = result.stdout.trimEnd()
  t.ok(await verifyPassword('correct horse', hash))
  t.notOk(await verifyPassword('correct horse\n', hash))
})

t.test('only one trailing newline is stripped', async (t) => {
  const result = await runCli(['hash-password'], 'pw\n\n')
  t.ok(await verifyPassword('pw\n', result.stdout.trimEnd()))
  const crlf = await runCli(['hash-password'], 'pw\r\n')
  t.ok(await verifyPassword('pw', crlf.stdout.trimEnd()))
})

t.test('an empty password, a password that is not UTF-8, or an argument is refused with exit 2', async (t) => {
  for (const [args, stdin, message] of [
    [[], '', /the password on stdin is empty/],
    [[], '\n', /the password on stdin is empty/],
    [[], Buffer.from([0x70, 0xff]), /not UTF-8/],
    [['secret'], 'x', /too many arguments; usage: payments-gate hash-password < password/],
    [['--password', 'secret'], 'x', /unknown flag --password/],
  ] as const) {
    const result = await runCli(['hash-password', ...args], stdin)
    t.equal(result.code, 2)
    t.equal(result.stdout, '')
    t.match(result.stderr, message)
    t.match(result.stderr, /^payments-gate hash-password: [^\n]*\n$/)
    t.notMatch(result.stderr, /secret/, 'an argument is never echoed: it may be a password')
  }
})
