// Package browsertest drives the web console (package console) in headless
// Chromium (Debian's chromium package; `make setup` installs it) against
// real databases. A module of its own, so that chromedp is not a
// requirement of the library.
package browsertest
