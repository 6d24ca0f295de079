// The headless Firefox that the page tests drive (through puppeteer-core over WebDriver BiDi):
// the stock Debian firefox-esr, a fresh temporary profile per launch, and preferences that
// keep it off the network (the machine running the tests may have none).

export const firefoxPath = process.env.FIREFOX ?? '/usr/bin/firefox-esr';

// On top of puppeteer's own profile defaults (updates, safe browsing lists, Normandy, remote
// settings and health reports already off): everything else that phones home at start-up.
export const FIREFOX_PREFS = {
  'app.update.enabled': false,
  'app.update.auto': false,
  'app.update.disabledForTesting': true,
  'browser.aboutwelcome.enabled': false,
  'browser.discovery.enabled': false,
  'browser.newtabpage.activity-stream.feeds.snippets': false,
  'browser.newtabpage.activity-stream.telemetry': false,
  'browser.ping-centre.telemetry': false,
  'browser.region.network.url': '',
  'browser.region.update.enabled': false,
  'browser.safebrowsing.provider.google4.updateURL': '',
  'browser.safebrowsing.provider.google.updateURL': '',
  'browser.safebrowsing.provider.mozilla.updateURL': '',
  'browser.search.geoip.url': '',
  'browser.topsites.contile.enabled': false,
  'captivedetect.canonicalURL': '',
  'datareporting.healthreport.uploadEnabled': false,
  'datareporting.policy.dataSubmissionEnabled': false,
  'extensions.blocklist.enabled': false,
  'extensions.getAddons.cache.enabled': false,
  'media.gmp-gmpopenh264.enabled': false,
  'media.gmp-manager.url': '',
  'messaging-system.rsexperimentloader.enabled': false,
  'network.captive-portal-service.enabled': false,
  'network.connectivity-service.enabled': false,
  'network.dns.disableIPv6': true,
  'network.dns.disablePrefetch': true,
  'network.prefetch-next': false,
  'network.trr.mode': 5, // no DNS over HTTPS
  'services.settings.server': 'http://127.0.0.1:9/',
  'toolkit.telemetry.enabled': false,
  'toolkit.telemetry.unified': false,
  'toolkit.telemetry.archive.enabled': false,
  'toolkit.telemetry.server': '',
  'toolkit.coverage.opt-out': true,
  // navigator.clipboard.readText() without Firefox's "Paste" pop-up (the copy test reads back
  // what the page wrote).
  'dom.events.testing.asyncClipboard': true,
};

/** puppeteer-core's launch options for it. */
export function firefoxLaunchOptions() {
  return {
    browser: 'firefox',
    executablePath: firefoxPath,
    headless: true,
    extraPrefsFirefox: FIREFOX_PREFS,
    protocolTimeout: 300_000,
  };
}
