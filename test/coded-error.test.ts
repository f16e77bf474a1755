import t from 'tap'
import { CodedError, renamed } from '../lib/coded-error.js'

t.test("a message about options names the library's options, and a caller may name them its own way", async (t) => {
  const error = new CodedError('EFINGERPRINTKEY', (name) => `${name('idempotencyFingerprintKey')} must be given`)
  t.equal(error.message, 'idempotencyFingerprintKey must be given')
  t.equal(
    error.worded?.((option) => `--${option}`),
    '--idempotencyFingerprintKey must be given',
  )
  const gate = renamed(error, (option) => `${option}Here`) as CodedError
  t.match(gate, { code: 'EFINGERPRINTKEY', message: 'idempotencyFingerprintKeyHere must be given' })
  t.equal(
    gate.worded?.((option) => `<${option}>`),
    '<idempotencyFingerprintKeyHere> must be given',
    'and renamed again',
  )
})

t.test('an error that names no option, or not one of ours, is left as it is', async (t) => {
  const plain = new CodedError('EUSAGE', 'one line')
  t.equal(plain.worded, undefined)
  t.equal(renamed(plain, String), plain)
  const bug = new TypeError('a bug')
  t.equal(renamed(bug, String), bug)
})
