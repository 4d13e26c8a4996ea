// attest-go acme-device-attest: an ACME client (golang.org/x/crypto/acme,
// not ours) that hands a tpmkey attestation to a real step-ca through the
// device-attest-01 challenge, so that step-ca's own verification
// (acme/challenge.go, attestation format "tpm") judges it.
//
//	usage: attest-go acme-device-attest DIRECTORY-URL CA-ROOT.pem IDENTIFIER \
//		KEYAUTH-FILE ATTESTATION-FILE -- COMMAND ARGS...
//
// It makes an account key (ECDSA P-256), an account, an order for the
// permanent identifier IDENTIFIER, and reads the order's device-attest-01
// challenge; it writes the challenge's key authorization to KEYAUTH-FILE,
// runs COMMAND (e.g. tpmkey attest KEY --challenge KEYAUTH-FILE -o
// ATTESTATION-FILE), and answers the challenge with {"attObj":
// base64url(CBOR {fmt, attStmt})} taken from ATTESTATION-FILE's
// attestation object. It prints "challenge: STATUS" and, for an invalid
// one, "error: " and step-ca's problem with its subproblems; exit 0 when
// the challenge is valid, 1 otherwise.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/fxamacker/cbor/v2"
	"golang.org/x/crypto/acme"
)

func acmeDeviceAttest(args []string) error {
	if len(args) < 7 || args[5] != "--" {
		return errors.New("usage: attest-go acme-device-attest DIRECTORY-URL CA-ROOT.pem IDENTIFIER KEYAUTH-FILE ATTESTATION-FILE -- COMMAND ARGS...")
	}
	dirURL, rootPath, identifier, keyAuthPath, attPath, command := args[0], args[1], args[2], args[3], args[4], args[6:]
	roots, err := pemCertificates(rootPath)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	for _, c := range roots {
		pool.AddCert(c)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	client := &acme.Client{
		Key:          key,
		DirectoryURL: dirURL,
		HTTPClient: &http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := client.Register(ctx, &acme.Account{}, acme.AcceptTOS); err != nil {
		return fmt.Errorf("new-account: %w", err)
	}
	order, err := client.AuthorizeOrder(ctx, []acme.AuthzID{{Type: "permanent-identifier", Value: identifier}})
	if err != nil {
		return fmt.Errorf("new-order: %w", err)
	}
	if len(order.AuthzURLs) != 1 {
		return fmt.Errorf("new-order: %d authorizations, not 1", len(order.AuthzURLs))
	}
	authz, err := client.GetAuthorization(ctx, order.AuthzURLs[0])
	if err != nil {
		return fmt.Errorf("authorization: %w", err)
	}
	var chal *acme.Challenge
	for _, c := range authz.Challenges {
		if c.Type == "device-attest-01" {
			chal = c
		}
	}
	if chal == nil {
		return errors.New("the authorization offers no device-attest-01 challenge")
	}
	keyAuth, err := client.HTTP01ChallengeResponse(chal.Token) // token "." thumbprint, as for every challenge
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyAuthPath, []byte(keyAuth), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", command[0], err)
	}
	object, _, err := readAttestation(attPath)
	if err != nil {
		return err
	}
	var full struct {
		Fmt     string          `cbor:"fmt"`
		AttStmt cbor.RawMessage `cbor:"attStmt"`
	}
	if err := cbor.Unmarshal(object, &full); err != nil {
		return fmt.Errorf("attestation object: %w", err)
	}
	// step-ca's form: fmt and attStmt only, no authData.
	attObj, err := cbor.Marshal(map[string]any{"fmt": full.Fmt, "attStmt": full.AttStmt})
	if err != nil {
		return err
	}
	payload, err := json.Marshal(map[string]string{"attObj": base64.RawURLEncoding.EncodeToString(attObj)})
	if err != nil {
		return err
	}
	chal.Payload = payload
	if _, err := client.Accept(ctx, chal); err != nil {
		return fmt.Errorf("challenge: %w", err)
	}
	for {
		c, err := client.GetChallenge(ctx, chal.URI)
		if err != nil {
			return fmt.Errorf("challenge: %w", err)
		}
		switch c.Status {
		case acme.StatusPending, acme.StatusProcessing:
			time.Sleep(200 * time.Millisecond)
			continue
		}
		fmt.Printf("challenge: %s\n", c.Status)
		if c.Status == acme.StatusValid {
			return nil
		}
		var problem *acme.Error
		if errors.As(c.Error, &problem) {
			fmt.Printf("error: %s: %s\n", problem.ProblemType, problem.Detail)
			for _, sub := range problem.Subproblems {
				fmt.Printf("error: %s: %s\n", sub.Type, sub.Detail)
			}
		} else if c.Error != nil {
			fmt.Printf("error: %v\n", c.Error)
		}
		return errors.New("step-ca did not accept the attestation")
	}
}
