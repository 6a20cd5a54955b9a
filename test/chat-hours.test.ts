import { sniff } from '../src/chat/attachments';
import { hoursState, localTime, type BusinessHours } from '../src/chat/availability';
import { fillPlaceholders } from '../src/chat/canned';

/** Pure rules of the chat: business hours in a time zone, placeholders, type sniffing. */
describe('support chat rules', () => {
  const paris: BusinessHours = {
    enabled: true,
    timezone: 'Europe/Paris',
    schedule: { mon: [['09:00', '12:00'], ['13:00', '17:30']], sat: [['10:00', '24:00']] },
    holidays: ['2026-12-25'],
    offline_message: '',
  };

  test('business hours are read in the configured time zone, intervals [from, to), holidays by local date', () => {
    // Monday 2026-11-30: Paris is UTC+1 in winter.
    expect(localTime(new Date('2026-11-30T08:00:00Z'), 'Europe/Paris')).toEqual({ day: 'mon', date: '2026-11-30', minutes: 540 });
    expect(hoursState(paris, new Date('2026-11-30T07:59:00Z'))).toEqual({ open: false, reason: 'outside_business_hours' });
    expect(hoursState(paris, new Date('2026-11-30T08:00:00Z'))).toEqual({ open: true });
    expect(hoursState(paris, new Date('2026-11-30T11:00:00Z'))).toEqual({ open: false, reason: 'outside_business_hours' }); // lunch 12:00-13:00 local
    expect(hoursState(paris, new Date('2026-11-30T16:29:00Z'))).toEqual({ open: true });
    expect(hoursState(paris, new Date('2026-11-30T16:30:00Z'))).toEqual({ open: false, reason: 'outside_business_hours' });
    // Summer time: 09:00 in Paris is 07:00 UTC.
    expect(hoursState(paris, new Date('2026-06-01T07:00:00Z'))).toEqual({ open: true });
    // Saturday until midnight local; Sunday is closed; 23:30 UTC Saturday is already Sunday in Paris.
    expect(hoursState(paris, new Date('2026-11-28T22:59:00Z'))).toEqual({ open: true });
    expect(hoursState(paris, new Date('2026-11-28T23:30:00Z'))).toEqual({ open: false, reason: 'outside_business_hours' });
    // 2026-12-25 is a Friday holiday; open Thursday and Friday all day to see the holiday win.
    const allDay = [['00:00', '24:00']] as [string, string][];
    const withFriday = { ...paris, schedule: { ...paris.schedule, thu: allDay, fri: allDay } };
    expect(hoursState(withFriday, new Date('2026-12-25T10:00:00Z'))).toEqual({ open: false, reason: 'holiday' });
    expect(hoursState(withFriday, new Date('2026-12-24T22:59:00Z'))).toEqual({ open: true }); // still the 24th in Paris
    expect(hoursState(withFriday, new Date('2026-12-24T23:00:00Z'))).toEqual({ open: false, reason: 'holiday' });
    expect(hoursState({ ...paris, enabled: false }, new Date('2026-11-29T03:00:00Z'))).toEqual({ open: true });
  });

  test('placeholders are filled; unknown ones stay as written', () => {
    expect(
      fillPlaceholders('Hi {{ customer_first_name }} ({{customer_email}}), {{agent_name}} here about #{{session_id}} / ticket {{ticket_id}} {{nope}}', {
        customer_name: 'Ada Lovelace',
        customer_email: 'ada@example.com',
        agent_name: 'Grace',
        session_id: 7,
        ticket_id: null,
      }),
    ).toBe('Hi Ada (ada@example.com), Grace here about #7 / ticket  {{nope}}');
    expect(fillPlaceholders('Hello {{customer_name}}', { customer_name: '', customer_email: '', agent_name: 'G', session_id: 1, ticket_id: 3 })).toBe('Hello there');
  });

  test('types come from the bytes', () => {
    expect(sniff(Buffer.from('%PDF-1.4 …'))?.mime).toBe('application/pdf');
    expect(sniff(Buffer.from('plain words\n'))?.mime).toBe('text/plain');
    expect(sniff(Buffer.from([0x4d, 0x5a, 0x90, 0x00]))).toBeNull(); // a Windows executable
    expect(sniff(Buffer.from('PK\u0003\u0004zip'))).toBeNull();
    expect(sniff(Buffer.alloc(0))).toBeNull();
    const webp = Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WEBPVP8X'), Buffer.alloc(8), Buffer.from([0x3f, 0x01, 0x00, 0xc7, 0x00, 0x00])]);
    expect(sniff(webp)).toEqual({ mime: 'image/webp', width: 320, height: 200 });
  });
});
